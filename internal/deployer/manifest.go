package deployer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// document is one YAML document of a rendered manifest.
type document struct {
	// raw is the document as rendered, comments included.
	raw []byte
	// comments are raw's leading comment lines, such as Helm's
	// "# Source: chart/templates/x.yaml".
	comments []byte
	// object is the parsed document; edits are made to it in place.
	object map[string]any
	// changed records that object was edited, so write must re-encode it.
	changed bool
}

// splitDocuments parses a multi-document YAML stream. Documents that hold
// nothing but comments or whitespace, or an empty object, are dropped;
// one that is not a YAML object is an error.
func splitDocuments(data []byte) ([]*document, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []*document
	for i := 1; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split manifest: %w", err)
		}
		// The reader keeps a separator line that opens the stream.
		if bytes.HasPrefix(raw, []byte("---")) {
			_, raw, _ = bytes.Cut(raw, []byte("\n"))
		}
		doc := &document{raw: bytes.Clone(raw), comments: leadingComments(raw)}
		var v any
		j, err := yaml.YAMLToJSON(raw)
		if err == nil {
			err = utiljson.Unmarshal(j, &v)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d%s: %w", i, doc.source(), err)
		}
		if v == nil {
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d%s: not a YAML object", i, doc.source())
		}
		if len(obj) == 0 {
			continue
		}
		doc.object = obj
		docs = append(docs, doc)
	}
}

// objects returns the Kubernetes objects of d: the items of a List, or d
// itself. They share d's maps, so editing them edits d.
func (d *document) objects() []*unstructured.Unstructured {
	if items, ok := d.object["items"].([]any); ok && strings.HasSuffix(fmt.Sprint(d.object["kind"]), "List") {
		var out []*unstructured.Unstructured
		for _, item := range items {
			if m, ok := item.(map[string]any); ok {
				out = append(out, &unstructured.Unstructured{Object: m})
			}
		}
		return out
	}
	return []*unstructured.Unstructured{{Object: d.object}}
}

// write appends d to w as "---" and the document: unchanged as rendered,
// or its leading comments and the edited object as YAML (keys sorted).
func (d *document) write(w *bytes.Buffer) error {
	w.WriteString("---\n")
	if !d.changed {
		w.Write(d.raw)
		if !bytes.HasSuffix(d.raw, []byte("\n")) {
			w.WriteByte('\n')
		}
		return nil
	}
	j, err := json.Marshal(d.object)
	if err != nil {
		return fmt.Errorf("encode document%s: %w", d.source(), err)
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return fmt.Errorf("encode document%s: %w", d.source(), err)
	}
	w.Write(d.comments)
	w.Write(y)
	return nil
}

// source returns " (<template>)" from a "# Source: <template>" comment, or "".
func (d *document) source() string {
	for line := range strings.Lines(string(d.comments)) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			return " (" + name + ")"
		}
	}
	return ""
}

// leadingComments returns the comment and blank lines at the start of raw.
func leadingComments(raw []byte) []byte {
	var n int
	for line := range bytes.Lines(raw) {
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && trimmed[0] != '#' {
			break
		}
		n += len(line)
	}
	return bytes.Clone(raw[:n])
}
