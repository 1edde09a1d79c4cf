package bundle_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

func TestManifestIDEncoding(t *testing.T) {
	m := bundle.Manifest{Resources: []bundle.Resource{
		{Name: "a.yaml", Content: "x: <1> & 2\n"},
		{Name: "bin", Content: "AAE=", Encoding: bundle.EncodingBase64},
	}}
	// What Fleet hashes: json.Encoder output, HTML-escaped, newline-ended.
	const encoded = `{"resources":[{"name":"a.yaml","content":"x: \u003c1\u003e \u0026 2\n"},` +
		`{"name":"bin","content":"AAE=","encoding":"base64"}]}` + "\n"
	sum := sha256.Sum256([]byte(encoded))
	want := ("s-" + hex.EncodeToString(sum[:]))[:63]
	assert.Equal(t, want, m.ID())
	assert.Len(t, m.ID(), 63)

	empty := sha256.Sum256([]byte(`{"resources":null}` + "\n"))
	assert.Equal(t, ("s-" + hex.EncodeToString(empty[:]))[:63], bundle.Manifest{}.ID())
}

func TestManifestIDChanges(t *testing.T) {
	base := func() bundle.Manifest {
		return bundle.Manifest{Resources: []bundle.Resource{
			{Name: "README.md", Content: "# hello\n"},
			{Name: "deploy.yaml", Content: "kind: Deployment\n"},
		}}
	}
	tests := []struct {
		name   string
		change func(m *bundle.Manifest)
	}{
		{"content byte", func(m *bundle.Manifest) { m.Resources[1].Content = "kind: Deploymenu\n" }},
		{"trailing newline", func(m *bundle.Manifest) { m.Resources[0].Content = "# hello" }},
		{"readme only", func(m *bundle.Manifest) { m.Resources[0].Content = "# hello!\n" }},
		{"file name", func(m *bundle.Manifest) { m.Resources[1].Name = "deploy.yml" }},
		{"encoding", func(m *bundle.Manifest) { m.Resources[0].Encoding = bundle.EncodingBase64 }},
		{"added file", func(m *bundle.Manifest) {
			m.Resources = append(m.Resources, bundle.Resource{Name: "z.yaml"})
		}},
		{"removed file", func(m *bundle.Manifest) { m.Resources = m.Resources[:1] }},
	}
	orig := base().ID()
	assert.Equal(t, orig, base().ID(), "stable")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.change(&m)
			assert.NotEqual(t, orig, m.ID())
		})
	}
}

func TestManifestIDOrderIndependent(t *testing.T) {
	a := bundle.Manifest{Resources: []bundle.Resource{{Name: "a", Content: "1"}, {Name: "b", Content: "2"}}}
	b := bundle.Manifest{Resources: []bundle.Resource{{Name: "b", Content: "2"}, {Name: "a", Content: "1"}}}
	assert.Equal(t, a.ID(), b.ID())
	assert.Equal(t, "b", b.Resources[0].Name, "ID must not reorder the caller's slice")
}

func TestResourceData(t *testing.T) {
	raw := []byte{0xff, 0x00, 0xfe, 'x'}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	tests := []struct {
		name    string
		r       bundle.Resource
		want    []byte
		wantErr bool
	}{
		{"text", bundle.Resource{Name: "a", Content: "héllo"}, []byte("héllo"), false},
		{"base64", bundle.Resource{Name: "b", Content: base64.StdEncoding.EncodeToString(raw), Encoding: "base64"}, raw, false},
		{"base64+gz", bundle.Resource{Name: "c", Content: base64.StdEncoding.EncodeToString(gz.Bytes()), Encoding: "base64+gz"}, raw, false},
		{"bad base64", bundle.Resource{Name: "d", Content: "!!", Encoding: "base64"}, nil, true},
		{"bad gzip", bundle.Resource{Name: "e", Content: "AAAA", Encoding: "base64+gz"}, nil, true},
		{"unknown encoding", bundle.Resource{Name: "f", Content: "x", Encoding: "rot13"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Data()
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.r.Name)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestManifestJSONRoundTrip(t *testing.T) {
	m := bundle.Manifest{Resources: []bundle.Resource{
		{Name: "a.yaml", Content: "a: <b>\n"},
		{Name: "bin", Content: "AAE=", Encoding: bundle.EncodingBase64},
	}}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	var got bundle.Manifest
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, m, got)
	assert.Equal(t, m.ID(), got.ID())
}
