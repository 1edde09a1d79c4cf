package codec_test

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// testKey returns a random key named id.
func testKey(t *testing.T, id string) keyring.Key {
	t.Helper()
	k := keyring.Key{ID: id}
	_, err := rand.Read(k.Bytes[:])
	require.NoError(t, err)
	return k
}

func testCodec(t *testing.T, keys ...keyring.Key) *codec.Codec {
	t.Helper()
	ring, err := keyring.New(keys...)
	require.NoError(t, err)
	c, err := codec.New(ring)
	require.NoError(t, err)
	return c
}

type deployInput struct {
	Cluster string
	Token   string
}

func TestRoundTrip(t *testing.T) {
	const secret = "tok-5fQ9wz"
	c := testCodec(t, testKey(t, "fk-1"))
	plain, err := converter.GetDefaultDataConverter().ToPayloads("hello", deployInput{Cluster: "c1", Token: secret}, []byte{0, 1, 2}, nil)
	require.NoError(t, err)

	enc, err := c.Encode(plain.Payloads)
	require.NoError(t, err)
	require.Len(t, enc, len(plain.Payloads))
	for _, p := range enc {
		assert.Equal(t, codec.EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
		assert.Equal(t, "fk-1", string(p.Metadata[codec.MetadataKeyID]))
		assert.NotContains(t, string(p.Data), secret)
		assert.NotContains(t, string(p.Data), "json/plain", "the original metadata is inside")
	}
	again, err := c.Encode(plain.Payloads[:1])
	require.NoError(t, err)
	assert.NotEqual(t, enc[0].Data, again[0].Data, "a fresh nonce every time")

	dec, err := c.Decode(enc)
	require.NoError(t, err)
	require.Len(t, dec, len(plain.Payloads))
	for i := range dec {
		assert.True(t, proto.Equal(plain.Payloads[i], dec[i]), "payload %d", i)
	}

	// Through the data converter, values come back as they went in.
	dc, err := codec.NewDataConverter(mustRing(t, testKey(t, "fk-1")), codec.Options{})
	require.NoError(t, err)
	p, err := dc.ToPayload(deployInput{Cluster: "c1", Token: secret})
	require.NoError(t, err)
	assert.True(t, codec.Encrypted(p))
	var got deployInput
	require.NoError(t, dc.FromPayload(p, &got))
	assert.Equal(t, deployInput{Cluster: "c1", Token: secret}, got)
}

func mustRing(t *testing.T, keys ...keyring.Key) *keyring.Ring {
	t.Helper()
	ring, err := keyring.New(keys...)
	require.NoError(t, err)
	return ring
}

// Rotation is adding a newer key: what the old key encrypted still
// decodes, and new payloads use the new key.
func TestRotation(t *testing.T) {
	k1, k2 := testKey(t, "fk-20260101t000000z"), testKey(t, "fk-20260201t000000z")
	p, err := converter.GetDefaultDataConverter().ToPayload("value")
	require.NoError(t, err)
	old, err := testCodec(t, k1).Encode([]*commonpb.Payload{p})
	require.NoError(t, err)

	rotated := testCodec(t, k2, k1) // any order: the greatest ID is the newest
	dec, err := rotated.Decode(old)
	require.NoError(t, err)
	assert.True(t, proto.Equal(p, dec[0]))

	fresh, err := rotated.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	assert.Equal(t, k2.ID, string(fresh[0].Metadata[codec.MetadataKeyID]))

	// A process that has not received k2 yet names the key it lacks.
	_, err = testCodec(t, k1).Decode(fresh)
	require.ErrorIs(t, err, codec.ErrUnknownKey)
	assert.Contains(t, err.Error(), k2.ID)
}

func TestDecodeErrors(t *testing.T) {
	k1, k2 := testKey(t, "fk-1"), testKey(t, "fk-2")
	c := testCodec(t, k1, k2)
	p, err := converter.GetDefaultDataConverter().ToPayload("value")
	require.NoError(t, err)
	encrypt := func() *commonpb.Payload {
		enc, err := c.Encode([]*commonpb.Payload{p})
		require.NoError(t, err)
		return enc[0]
	}

	tests := []struct {
		name    string
		alter   func(p *commonpb.Payload)
		wantErr error
		wantMsg string // a substring of the error
	}{
		{"flipped ciphertext bit", func(p *commonpb.Payload) { p.Data[len(p.Data)/2] ^= 1 }, codec.ErrAuthentication, "fk-2"},
		{"flipped nonce bit", func(p *commonpb.Payload) { p.Data[0] ^= 0x80 }, codec.ErrAuthentication, "fk-2"},
		{"truncated", func(p *commonpb.Payload) { p.Data = p.Data[:len(p.Data)-1] }, codec.ErrAuthentication, "fk-2"},
		{"shorter than a nonce and tag", func(p *commonpb.Payload) { p.Data = p.Data[:20] }, codec.ErrAuthentication, "fk-2"},
		{"relabelled with another key", func(p *commonpb.Payload) { p.Metadata[codec.MetadataKeyID] = []byte("fk-1") }, codec.ErrAuthentication, "fk-1"},
		{"unknown key", func(p *commonpb.Payload) { p.Metadata[codec.MetadataKeyID] = []byte("fk-gone") }, codec.ErrUnknownKey, `"fk-gone"`},
		{"no key ID", func(p *commonpb.Payload) { delete(p.Metadata, codec.MetadataKeyID) }, codec.ErrUnknownKey, `key ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := encrypt()
			tt.alter(enc)
			_, err := c.Decode([]*commonpb.Payload{enc})
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.wantMsg)
			for _, k := range []keyring.Key{k1, k2} {
				assert.NotContains(t, err.Error(), string(k.Encode()[:8]), "no key material in errors")
			}
		})
	}
}

// Payloads written before encryption was turned on still decode.
func TestDecodePassesPlainPayloadsThrough(t *testing.T) {
	c := testCodec(t, testKey(t, "fk-1"))
	dc := converter.GetDefaultDataConverter()
	plain, err := dc.ToPayloads("old", 42, deployInput{Cluster: "c1"})
	require.NoError(t, err)
	dec, err := c.Decode(plain.Payloads)
	require.NoError(t, err)
	for i := range dec {
		assert.Same(t, plain.Payloads[i], dec[i])
	}

	// Old and new payloads side by side, as in a history that spans the
	// switch.
	enc, err := c.Encode(plain.Payloads[:1])
	require.NoError(t, err)
	mixed, err := c.Decode([]*commonpb.Payload{enc[0], plain.Payloads[1]})
	require.NoError(t, err)
	var s string
	var n int
	require.NoError(t, dc.FromPayloads(&commonpb.Payloads{Payloads: mixed}, &s, &n))
	assert.Equal(t, "old", s)
	assert.Equal(t, 42, n)
}

// A client without keys reads plain payloads and says why it cannot read
// encrypted ones.
func TestKeylessDataConverter(t *testing.T) {
	keyless := codec.NewKeylessDataConverter()
	p, err := keyless.ToPayload("plain")
	require.NoError(t, err)
	assert.False(t, codec.Encrypted(p))
	var s string
	require.NoError(t, keyless.FromPayload(p, &s))
	assert.Equal(t, "plain", s)

	keyed, err := codec.NewDataConverter(mustRing(t, testKey(t, "fk-7")), codec.Options{})
	require.NoError(t, err)
	enc, err := keyed.ToPayload("secret")
	require.NoError(t, err)
	err = keyless.FromPayload(enc, &s)
	require.ErrorIs(t, err, codec.ErrEncrypted)
	assert.Contains(t, err.Error(), "fk-7")
}

func TestNewEmptyRing(t *testing.T) {
	ring, err := keyring.New()
	require.NoError(t, err)
	_, err = codec.New(ring)
	require.ErrorIs(t, err, keyring.ErrNoKeys)
}

// Failure messages and stack traces are encrypted, and a caller with the
// keys gets them back unchanged, type and details included.
func TestFailureConverter(t *testing.T) {
	const msg = "GitRepo a/b sent to the workflow of a/c"
	dc, err := codec.NewDataConverter(mustRing(t, testKey(t, "fk-1")), codec.Options{})
	require.NoError(t, err)
	fc := codec.NewFailureConverter(dc)

	cause := temporal.NewNonRetryableApplicationError(msg, "InvalidSpec", errors.New("inner cause"), "detail")
	f := fc.ErrorToFailure(cause)
	assert.Equal(t, "Encoded failure", f.GetMessage())
	assert.NotContains(t, f.String(), "sent to the workflow")
	assert.NotContains(t, f.String(), "inner cause")
	require.NotNil(t, f.GetEncodedAttributes())
	assert.True(t, codec.Encrypted(f.GetEncodedAttributes()))
	assert.Equal(t, "InvalidSpec", f.GetApplicationFailureInfo().GetType(), "the type stays plain: retry policies read it")

	// FailureToError decodes into the failure it is given.
	back := fc.FailureToError(proto.Clone(f).(*failurepb.Failure))
	var ae *temporal.ApplicationError
	require.ErrorAs(t, back, &ae)
	assert.Equal(t, msg, ae.Message())
	assert.Equal(t, "InvalidSpec", ae.Type())
	assert.True(t, ae.NonRetryable())
	var detail string
	require.NoError(t, ae.Details(&detail))
	assert.Equal(t, "detail", detail)
	assert.ErrorContains(t, back, "inner cause")

	// Without the keys the message stays hidden, not garbled.
	keylessFC := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: codec.NewKeylessDataConverter()})
	hidden := keylessFC.FailureToError(f).Error()
	assert.Contains(t, hidden, "Encoded failure")
	assert.NotContains(t, hidden, "sent to the workflow")
}
