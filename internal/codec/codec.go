package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// Metadata of an encrypted payload.
const (
	// EncodingEncrypted is the "encoding" metadata of an encrypted payload.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID is the metadata key naming the key a payload is
	// encrypted with.
	MetadataKeyID = "encryption-key-id"
)

// nonceSize is GCM's standard nonce length.
const nonceSize = 12

var (
	// ErrUnknownKey means a payload is encrypted with a key the keyring
	// does not hold.
	ErrUnknownKey = errors.New("key is not in the keyring")
	// ErrAuthentication means a payload does not open with its key: it was
	// altered, truncated, or encrypted with another key of the same ID.
	ErrAuthentication = errors.New("message authentication failed")
	// ErrEncrypted means a client without keys read an encrypted payload.
	ErrEncrypted = errors.New("payload is encrypted and no payload keys were given")
)

// Codec is an AES-256-GCM converter.PayloadCodec. It is safe for
// concurrent use.
type Codec struct {
	newest string
	aeads  map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns a codec that encrypts with ring's newest key and decrypts
// with any of its keys. The ring is read once: a key added to its directory
// later needs a new codec.
func New(ring *keyring.Ring) (*Codec, error) {
	keys := ring.Keys()
	if len(keys) == 0 {
		return nil, keyring.ErrNoKeys
	}
	c := &Codec{newest: ring.Newest().ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for _, k := range keys {
		block, err := aes.NewCipher(k.Bytes[:])
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// NewDataConverter returns the SDK's default data converter with every
// payload passing through Compression and then New(ring). With
// opts.RequireEncryption, decoding refuses a payload that is not encrypted
// with a *PlaintextError before it reaches the codecs; without it, plain
// payloads are read as they are.
func NewDataConverter(ring *keyring.Ring, opts Options) (converter.DataConverter, error) {
	c, err := New(ring)
	if err != nil {
		return nil, err
	}
	// Encoding runs the codecs last to first, decoding first to last.
	codecs := []converter.PayloadCodec{c, Compression}
	if opts.RequireEncryption {
		codecs = append([]converter.PayloadCodec{requireEncrypted{}}, codecs...)
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codecs...), nil
}

// NewKeylessDataConverter returns the data converter of a client given no
// keys: it writes plain payloads, reads plain payloads, and fails on an
// encrypted one with an error wrapping ErrEncrypted, so that the caller can
// say what is missing instead of "payload encoding is not supported".
// Large payloads are compressed (Compression).
func NewKeylessDataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), keyless{}, Compression)
}

// NewFailureConverter returns the SDK's default failure converter with
// dc and EncodeCommonAttributes: the message and stack trace of every
// failure are moved into a payload that dc encodes, leaving "Encoded
// failure" in the plain message. Callers whose client has the same
// converter get the original message back (FailureToError decodes it);
// the error's type and retryability stay plain.
func NewFailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          dc,
		EncodeCommonAttributes: true,
	})
}

// Encode encrypts each payload, whole, with the newest key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.newest]
	aad := []byte(c.newest)
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("encrypt payload: %w", err)
		}
		data := make([]byte, nonceSize, nonceSize+len(plain)+aead.Overhead())
		if _, err := rand.Read(data); err != nil {
			return payloads, fmt.Errorf("encrypt payload: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.newest),
			},
			Data: aead.Seal(data, data[:nonceSize], plain, aad),
		}
	}
	return out, nil
}

// Decode decrypts each encrypted payload and passes the others through
// unchanged (the same pointer). Errors name the key ID, never key bytes,
// and wrap ErrUnknownKey or ErrAuthentication.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if !Encrypted(p) {
			out[i] = p
			continue
		}
		id := keyID(p)
		aead, ok := c.aeads[id]
		if !ok {
			return payloads, fmt.Errorf("decrypt payload with key %q: %w", id, ErrUnknownKey)
		}
		data := p.GetData()
		if len(data) < nonceSize+aead.Overhead() {
			return payloads, fmt.Errorf("decrypt payload with key %s: %w", id, ErrAuthentication)
		}
		plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], []byte(id))
		if err != nil {
			return payloads, fmt.Errorf("decrypt payload with key %s: %w", id, ErrAuthentication)
		}
		dec := &commonpb.Payload{}
		if err := proto.Unmarshal(plain, dec); err != nil {
			return payloads, fmt.Errorf("decrypt payload with key %s: not a payload: %w", id, err)
		}
		out[i] = dec
	}
	return out, nil
}

// Encrypted reports whether p is an encrypted payload.
func Encrypted(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == EncodingEncrypted
}

func keyID(p *commonpb.Payload) string { return string(p.GetMetadata()[MetadataKeyID]) }

// keyless is the codec of a client without keys: see
// NewKeylessDataConverter.
type keyless struct{}

func (keyless) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return payloads, nil
}

func (keyless) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	for _, p := range payloads {
		if Encrypted(p) {
			return payloads, fmt.Errorf("read payload encrypted with key %q: %w", keyID(p), ErrEncrypted)
		}
	}
	return payloads, nil
}
