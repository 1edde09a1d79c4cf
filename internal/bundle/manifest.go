package bundle

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// Resource encodings. Read produces EncodingBase64 for files that are not
// valid UTF-8; EncodingBase64Gzip is what Fleet itself produces for such
// files and for compressed bundles, and is accepted when decoding.
const (
	EncodingBase64     = "base64"
	EncodingBase64Gzip = "base64+gz"
)

// Resource is one file of a bundle. Its JSON form is Fleet's BundleResource,
// which is what the manifest ID is computed over.
type Resource struct {
	// Name is the slash-separated path of the file relative to the bundle
	// directory.
	Name string `json:"name,omitempty"`
	// Content is the file content: the text itself when Encoding is empty,
	// otherwise the encoded bytes.
	Content string `json:"content,omitempty"`
	// Encoding is empty for UTF-8 text, or EncodingBase64 or
	// EncodingBase64Gzip.
	Encoding string `json:"encoding,omitempty"`
}

// newResource returns the resource for a file, choosing the encoding Read
// uses: plain text when data is valid UTF-8 (JSON would otherwise mangle
// it), base64 when not.
func newResource(name string, data []byte) Resource {
	if utf8.Valid(data) {
		return Resource{Name: name, Content: string(data)}
	}
	return Resource{Name: name, Content: base64.StdEncoding.EncodeToString(data), Encoding: EncodingBase64}
}

// Data returns the decoded file content.
func (r Resource) Data() ([]byte, error) {
	switch r.Encoding {
	case "":
		return []byte(r.Content), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			return nil, fmt.Errorf("decode resource %s: %w", r.Name, err)
		}
		return b, nil
	case EncodingBase64Gzip:
		b, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			return nil, fmt.Errorf("decode resource %s: %w", r.Name, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("decompress resource %s: %w", r.Name, err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("decompress resource %s: %w", r.Name, err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("decode resource %s: unknown encoding %q", r.Name, r.Encoding)
	}
}

// Manifest is the content of a bundle: its files, sorted by name. Its JSON
// form is Fleet's manifest, which Fleet stores as a Content object.
type Manifest struct {
	// Resources are the bundle's files, sorted by Name.
	Resources []Resource `json:"resources"`
}

// manifestIDLen is the length of a manifest ID: Fleet truncates IDs so they
// fit a Kubernetes label value.
const manifestIDLen = 63

// ID returns Fleet's manifest ID: "s-" followed by the SHA-256 of the
// manifest's JSON encoding (as json.Encoder writes it: HTML-escaped, with a
// trailing newline), truncated to 63 characters. Any change to any byte of
// any file, or to a file name, changes the ID. Resources are hashed in name
// order whatever order m holds them in.
func (m Manifest) ID() string {
	byName := func(a, b Resource) int { return cmp.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(m.Resources, byName) {
		m.Resources = slices.Clone(m.Resources)
		slices.SortStableFunc(m.Resources, byName)
	}
	var buf bytes.Buffer
	// Encoding strings and a slice of them cannot fail.
	_ = json.NewEncoder(&buf).Encode(m)
	sum := sha256.Sum256(buf.Bytes())
	return ("s-" + hex.EncodeToString(sum[:]))[:manifestIDLen]
}

// resource returns the resource with the given name.
func (m Manifest) resource(name string) (Resource, bool) {
	for _, r := range m.Resources {
		if r.Name == name {
			return r, true
		}
	}
	return Resource{}, false
}
