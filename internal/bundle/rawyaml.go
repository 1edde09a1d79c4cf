package bundle

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// objectDocuments returns the YAML documents of data that are Kubernetes
// objects (a mapping with a non-empty apiVersion and kind), each verbatim.
// It returns data itself when nothing had to be dropped, the kept
// documents joined by "---" lines when something did, and nil when no
// document is an object. Fleet's agent also skips such documents, whereas
// Helm would fail the install on them; typical cases are a stray config
// file or a values file in a raw YAML bundle. A document that is not valid
// YAML is an error.
func objectDocuments(data []byte) ([]byte, error) {
	docs := splitDocuments(string(data))
	var kept []string
	dropped := false
	for i, doc := range docs {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", i+1, err)
		}
		if v == nil {
			continue // Only comments or whitespace.
		}
		if !isObject(v) {
			dropped = true
			continue
		}
		kept = append(kept, doc)
	}
	switch {
	case len(kept) == 0:
		return nil, nil
	case !dropped:
		return data, nil
	}
	var b strings.Builder
	for i, doc := range kept {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(doc)
		if !strings.HasSuffix(doc, "\n") {
			b.WriteByte('\n')
		}
	}
	return []byte(b.String()), nil
}

func isObject(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	return apiVersion != "" && kind != ""
}

// splitDocuments splits a YAML stream at its "---" document markers (a
// line that is "---" alone or followed by a blank and more). Text after the
// marker on the same line starts the next document.
func splitDocuments(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		trimmed := strings.TrimRight(line, "\r\n")
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") || strings.HasPrefix(trimmed, "---\t") {
			docs = append(docs, cur.String())
			cur.Reset()
			if rest := strings.TrimSpace(trimmed[3:]); rest != "" {
				cur.WriteString(rest + "\n")
			}
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}
