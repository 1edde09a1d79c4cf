package codec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// With RequireEncryption, the data converter reads what it wrote and
// refuses every payload a client without the keys could have written,
// naming its encoding; without it, the same payloads are read.
func TestRequireEncryption(t *testing.T) {
	ring := mustRing(t, testKey(t, "fk-1"))
	strict, err := codec.NewDataConverter(ring, codec.Options{RequireEncryption: true})
	require.NoError(t, err)
	lax, err := codec.NewDataConverter(ring, codec.Options{})
	require.NoError(t, err)

	// What the keyed converter writes, small or compressed, reads back.
	big := make([]byte, 1<<20)
	for _, v := range []any{"value", deployInput{Cluster: "c1", Token: "t"}, big} {
		p, err := strict.ToPayload(v)
		require.NoError(t, err)
		assert.True(t, codec.Encrypted(p))
		require.NoError(t, strict.FromPayload(p, new(any)))
	}

	keylessBig, err := codec.NewKeylessDataConverter().ToPayload(big)
	require.NoError(t, err)
	require.Equal(t, codec.EncodingZlib, string(keylessBig.Metadata[converter.MetadataEncoding]))
	tests := []struct {
		name         string
		payload      *commonpb.Payload
		wantEncoding string // what the error names
	}{
		{"plain JSON", mustPayload(t, "forged-Qx7"), "json/plain"},
		{"nil", mustPayload(t, nil), "binary/null"},
		{"compressed, not encrypted", keylessBig, codec.EncodingZlib},
		{"no metadata", &commonpb.Payload{Data: []byte(`"x"`)}, ""},
		{"encrypted label on another metadata key", &commonpb.Payload{Metadata: map[string][]byte{
			"encodings": []byte(codec.EncodingEncrypted), converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"x"`)}, "json/plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := strict.FromPayload(tt.payload, new(any))
			var plain *codec.PlaintextError
			require.ErrorAs(t, err, &plain)
			assert.Equal(t, tt.wantEncoding, plain.Encoding)
			assert.Equal(t, outcome.Invalid, plain.Class())
			assert.Contains(t, err.Error(), "--require-encryption")
			if len(tt.payload.GetData()) > 0 {
				assert.NotContains(t, err.Error(), string(tt.payload.GetData()), "the payload's data stays out of the error")
			}

			// One plain payload among encrypted ones refuses them all.
			good, err := strict.ToPayloads("a", "b")
			require.NoError(t, err)
			mixed := &commonpb.Payloads{Payloads: []*commonpb.Payload{good.Payloads[0], tt.payload, good.Payloads[1]}}
			var a, b, c any
			require.ErrorAs(t, strict.FromPayloads(mixed, &a, &b, &c), &plain)

			if tt.payload.GetMetadata() != nil {
				require.NoError(t, lax.FromPayload(tt.payload, new(any)), "read without RequireEncryption")
			}
		})
	}
}

func mustPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}
