package codec_test

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// fleetStatus is the deployments of n clusters as the GitRepo's status
// carries them: the kind of value that grows with a fleet.
func fleetStatus(n int) []status.Deployment {
	out := make([]status.Deployment, n)
	for i := range out {
		name := fmt.Sprintf("vc-%04d", i)
		// Options hashes differ per cluster and do not compress.
		id := fmt.Sprintf("s-%x:%x", sha256.Sum256([]byte("fanout-app")), sha256.Sum256([]byte(name)))
		out[i] = status.Deployment{Bundle: "fanout-app", Cluster: name, Release: "fanout-app", Namespace: name,
			DeploymentID: id, AppliedDeploymentID: id,
			State: status.Ready, Resources: 1, ReadyResources: 1}
	}
	return out
}

// Temporal refuses payloads over 2 MB. Encoded by the controller's data
// converters, 10,000 clusters' deployments fit with room to spare, sealed
// or not, and decode to what they were.
func TestCompression_FleetPayloadFits(t *testing.T) {
	const limit = 2 << 20
	value := fleetStatus(10000)
	raw, err := converter.GetDefaultDataConverter().ToPayload(value)
	require.NoError(t, err)
	require.Greater(t, len(raw.Data), limit, "the plain payload is over the limit")

	ring, err := keyring.New(testKey(t, "fk-1"))
	require.NoError(t, err)
	keyed, err := codec.NewDataConverter(ring, codec.Options{})
	require.NoError(t, err)
	for name, dc := range map[string]converter.DataConverter{"keyed": keyed, "keyless": codec.NewKeylessDataConverter()} {
		t.Run(name, func(t *testing.T) {
			p, err := dc.ToPayload(value)
			require.NoError(t, err)
			assert.Less(t, len(p.Data), limit/4, "compressed to well under the limit (%d bytes)", len(p.Data))
			t.Logf("%d bytes compressed to %d", len(raw.Data), len(p.Data))
			var back []status.Deployment
			require.NoError(t, dc.FromPayload(p, &back))
			assert.Equal(t, value, back)
		})
	}
}

func TestCompression_SmallPayloadsPassThrough(t *testing.T) {
	// A hundred clusters' status stays plain JSON, for the Temporal UI.
	for _, v := range []any{map[string]string{"cluster": "c1"}, fleetStatus(100)} {
		small, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		enc, err := codec.Compression.Encode([]*commonpb.Payload{small})
		require.NoError(t, err)
		assert.Same(t, small, enc[0])
	}

	// Incompressible data stays as it was, whatever its size.
	noise := make([]byte, 512<<10)
	_, err := rand.Read(noise)
	require.NoError(t, err)
	random, err := converter.GetDefaultDataConverter().ToPayload(noise)
	require.NoError(t, err)
	enc, err := codec.Compression.Encode([]*commonpb.Payload{random})
	require.NoError(t, err)
	assert.Same(t, random, enc[0])
}

// Payloads written before compression existed, and payloads of the SDK's
// own zlib codec, decode; what Compression writes, the SDK's codec reads.
func TestCompression_CompatibleWithSDKZlib(t *testing.T) {
	p, err := converter.GetDefaultDataConverter().ToPayload(fleetStatus(2000))
	require.NoError(t, err)

	dec, err := codec.Compression.Decode([]*commonpb.Payload{p})
	require.NoError(t, err)
	assert.Same(t, p, dec[0], "an uncompressed payload passes through")

	sdk := converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true})
	ours, err := codec.Compression.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	assert.Equal(t, codec.EncodingZlib, string(ours[0].Metadata[converter.MetadataEncoding]))
	back, err := sdk.Decode(ours)
	require.NoError(t, err)
	assert.Equal(t, p.Data, back[0].Data)

	theirs, err := sdk.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	back, err = codec.Compression.Decode(theirs)
	require.NoError(t, err)
	assert.Equal(t, p.Data, back[0].Data)

	_, err = codec.Compression.Decode([]*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(codec.EncodingZlib)}, Data: []byte("not zlib"),
	}})
	assert.Error(t, err)
}

// A crafted payload that would decompress to more than a payload may hold
// is refused, not allocated.
func TestCompression_BoundsDecompression(t *testing.T) {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	zeros := make([]byte, 1<<20)
	for range 129 {
		_, err := w.Write(zeros)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	bomb := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(codec.EncodingZlib)}, Data: buf.Bytes()}
	_, err := codec.Compression.Decode([]*commonpb.Payload{bomb})
	assert.ErrorIs(t, err, codec.ErrTooLarge)
}
