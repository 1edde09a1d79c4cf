package codec

import (
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// Options of NewDataConverter.
type Options struct {
	// RequireEncryption makes the data converter refuse, on decoding, any
	// payload that is not encrypted (a *PlaintextError), so that a client
	// without the keys cannot hand a worker or the CLI a value it made
	// up. It does not change encoding, which always encrypts. Optional:
	// default false, which reads plain payloads as they are (histories
	// from before encryption was turned on).
	RequireEncryption bool
}

// PlaintextError is a payload refused because it is not encrypted while
// encryption is required (Options.RequireEncryption). It names the
// payload's encoding, never its data.
type PlaintextError struct {
	// Encoding is the payload's "encoding" metadata, such as "json/plain"
	// or "binary/zlib"; empty when it has none.
	Encoding string
}

func (e *PlaintextError) Error() string {
	enc := e.Encoding
	if enc == "" {
		enc = "(none)"
	}
	return fmt.Sprintf("payload with encoding %s is not encrypted, and encryption is required (--require-encryption): "+
		"it was written by a client without the payload keys", enc)
}

// Class is outcome.Invalid: the payload is refused as it is, and sending
// it again changes nothing.
func (e *PlaintextError) Class() outcome.Class { return outcome.Invalid }

// requireEncrypted is the codec that refuses plain payloads on Decode and
// passes payloads through on Encode. It sits outermost in the chain, so it
// sees payloads as they are stored.
type requireEncrypted struct{}

var _ converter.PayloadCodec = requireEncrypted{}

func (requireEncrypted) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return payloads, nil
}

func (requireEncrypted) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	for _, p := range payloads {
		if !Encrypted(p) {
			return payloads, &PlaintextError{Encoding: string(p.GetMetadata()[converter.MetadataEncoding])}
		}
	}
	return payloads, nil
}
