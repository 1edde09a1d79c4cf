package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// maxFuzzInput bounds the documents one iteration decodes, so each stays
// cheap.
const maxFuzzInput = 64 << 10

// FuzzDecode: whatever `flotilla apply -f` reads, Decode neither panics
// nor accepts what it would not accept again: every error names the
// source; every document it returns has one kind, the source's
// "#<index>", and validates; and writing a document back as YAML and
// decoding it gives the same document (nothing is lost or changed in the
// round trip the CLI and the workflows make).
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzInput {
			t.Skip()
		}
		docs, err := Decode(bytes.NewReader(in), "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the source", err)
			}
			return
		}
		for _, d := range docs {
			checkDocument(t, d)
		}
	})
}

// checkDocument holds one decoded document to Decode's contract.
func checkDocument(t *testing.T, d Document) {
	t.Helper()
	if d.Kind() == "" || !strings.HasPrefix(d.Source, "fuzz.yaml#") {
		t.Fatalf("document %+v: kind %q, source %q", d, d.Kind(), d.Source)
	}
	obj := d.object()
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatalf("%s: marshal: %v", d.Source, err)
	}
	again, err := Decode(bytes.NewReader(data), "again.yaml")
	if err != nil {
		t.Fatalf("%s: accepted, but its YAML is refused: %v\n%s", d.Source, err, data)
	}
	if len(again) != 1 || again[0].Kind() != d.Kind() {
		t.Fatalf("%s: its YAML decodes to %d documents", d.Source, len(again))
	}
	want, _ := json.Marshal(obj)
	got, _ := json.Marshal(again[0].object())
	if !bytes.Equal(want, got) {
		t.Fatalf("%s: round trip changed the document\nbefore %s\nafter  %s", d.Source, want, got)
	}
}

// FuzzDecodeSecret: a Secret's values never appear in a Decode error,
// whatever its name, namespace and keys.
func FuzzDecodeSecret(f *testing.F) {
	f.Add("git-creds", "", "password", "s3cret-value", true)
	f.Add("s", "fleet-default", "a b", "hunter2-hunter2", false)
	f.Add("Bad_Name", "ns", "token", "ghp_0123456789abcdef", true)
	f.Add("s", "Bad NS", "", "value-of-an-empty-key", false)
	f.Fuzz(func(t *testing.T, name, namespace, key, value string, stringData bool) {
		if len(value) < 8 || strings.Contains(name+namespace+key, value) {
			t.Skip() // too short to tell apart, or named elsewhere
		}
		doc := map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": namespace}}
		if stringData {
			doc["stringData"] = map[string]any{key: value}
		} else {
			doc["data"] = map[string]any{key: []byte(value)} // base64 in JSON
		}
		in, err := json.Marshal(doc)
		if err != nil {
			t.Skip()
		}
		if _, err := Decode(bytes.NewReader(in), "secret.yaml"); err != nil && strings.Contains(err.Error(), value) {
			t.Fatalf("error %q holds the secret's value", err)
		}
	})
}

// decodeSeeds returns the YAML documents of the package's tests (the
// string literals holding "kind:") and the repository's example documents,
// with variants: cut in half, every document
// together in one stream, and as JSON.
func decodeSeeds(f *testing.F) [][]byte {
	f.Helper()
	var docs [][]byte
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range tests {
		docs = append(docs, literalsWith(f, file, "kind:")...)
	}
	examples, _ := filepath.Glob("../../examples/*.yaml")
	for _, file := range examples {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		docs = append(docs, data)
	}
	seeds := append([][]byte{}, docs...)
	for _, d := range docs {
		seeds = append(seeds, d[:len(d)/2])
		if js, err := yaml.YAMLToJSON(d); err == nil {
			seeds = append(seeds, js)
		}
	}
	seeds = append(seeds, bytes.Join(docs, []byte("\n---\n")), nil, []byte("---\n---\n"), []byte("[]"), []byte("kind: 3"))
	return seeds
}

// literalsWith returns the string literals of a Go file that contain sub.
func literalsWith(f *testing.F, file, sub string) [][]byte {
	f.Helper()
	parsed, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	ast.Inspect(parsed, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", file, err))
		}
		if strings.Contains(s, sub) {
			out = append(out, []byte(s))
		}
		return true
	})
	return out
}
