package codec

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// EncodingZlib is the "encoding" metadata of a compressed payload: its
// data is the original payload, marshalled as protobuf and compressed
// with zlib. It is the format of the Temporal SDK's own zlib codec, so
// Temporal's tools that know that codec read it too.
const EncodingZlib = "binary/zlib"

// compressMin is the smallest payload Compression compresses. The
// payloads that grow with the fleet (targets, inventories, deployments,
// status) are JSON with the same keys, bundle names and deployment IDs
// over and over and shrink five- to tenfold; below a quarter of a
// megabyte they are far from Temporal's limit and stay plain, so the
// Temporal UI and CLI show them without a codec.
const compressMin = 256 << 10

// maxDecompressed bounds what one payload may decompress to: far above
// what a fleet's largest payload grows to (a few MiB at 10,000 clusters),
// far below what a crafted payload could make a controller allocate.
const maxDecompressed = 128 << 20

// ErrTooLarge means a compressed payload decompresses to more than a
// payload may hold.
var ErrTooLarge = errors.New("payload decompresses to more than 128 MiB")

// Compression is the payload codec that compresses large payloads with
// zlib (see EncodingZlib) and passes the others through. Payloads grow
// with the number of clusters; Temporal refuses any over 2 MB and the
// encryption that follows it leaves nothing to compress, so the data
// converters compress first and seal the result. A compressed payload is
// kept only if it is smaller. Decode opens compressed payloads and passes
// every other payload through, so histories written before compression
// existed read as before. It is safe for concurrent use.
var Compression converter.PayloadCodec = compression{}

type compression struct{}

// writers are reused: a zlib writer allocates its window and tables, half
// a megabyte, on creation.
var writers = sync.Pool{New: func() any { return zlib.NewWriter(io.Discard) }}

func (compression) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if len(p.GetData()) < compressMin {
			continue
		}
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("compress payload: %w", err)
		}
		var buf bytes.Buffer
		buf.Grow(len(plain) / 4)
		w := writers.Get().(*zlib.Writer)
		w.Reset(&buf)
		_, err = w.Write(plain)
		if err == nil {
			err = w.Close()
		}
		writers.Put(w)
		if err != nil {
			return payloads, fmt.Errorf("compress payload: %w", err)
		}
		if buf.Len() >= len(plain) {
			continue
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingZlib)},
			Data:     buf.Bytes(),
		}
	}
	return out, nil
}

func (compression) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingZlib {
			continue
		}
		r, err := zlib.NewReader(bytes.NewReader(p.GetData()))
		if err != nil {
			return payloads, fmt.Errorf("decompress payload: %w", err)
		}
		plain, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
		if err == nil {
			err = r.Close()
		}
		if err != nil {
			return payloads, fmt.Errorf("decompress payload: %w", err)
		}
		if len(plain) > maxDecompressed {
			return payloads, fmt.Errorf("decompress payload: %w", ErrTooLarge)
		}
		dec := &commonpb.Payload{}
		if err := proto.Unmarshal(plain, dec); err != nil {
			return payloads, fmt.Errorf("decompress payload: not a payload: %w", err)
		}
		out[i] = dec
	}
	return out, nil
}
