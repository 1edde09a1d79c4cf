package bundle

import (
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/yaml"
)

// objectDocuments checks the YAML documents of a raw YAML file. Every
// document must be a Kubernetes object (a mapping with a non-empty
// apiVersion and kind) or empty (only comments or whitespace); then it
// returns the documents to deploy, or nil when no document is an object.
// Otherwise the whole file is skipped, as Fleet's agent skips a file with
// such a document (its objects too), whereas Helm would fail the install:
// it returns nil, and problem describes the first such document
// ("document 2 has no kind"). Typical cases are a stray config file or a
// values file in a raw YAML bundle. A document that is not valid YAML is
// an error.
//
// A list (a document with an items sequence, such as apiVersion: v1,
// kind: List, or a ConfigMapList) is expanded into its items, each its
// own document, as Fleet's renders and Helm's install expand it
// (apimachinery decodes any document with items as a list); each item
// must be an object, lists nest. Without lists the returned documents are
// data itself, comments and all.
//
// Documents are numbered from 1, as a reader counts them: comments before
// a leading "---" are not a document.
func objectDocuments(data []byte) (docs []byte, problem string, err error) {
	split := splitDocuments(string(data))
	var out strings.Builder
	objects, lists := 0, 0
	offset := 1
	for i, doc := range split {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return nil, "", fmt.Errorf("YAML document %d: %w", i+offset, err)
		}
		if v == nil {
			if i == 0 && len(split) > 1 {
				offset = 0
			}
			continue // Only comments or whitespace.
		}
		items, p := listItems(v)
		if p == "" && items == nil {
			p = objectProblem(v)
		}
		if p != "" {
			if problem == "" {
				problem = fmt.Sprintf("document %d %s", i+offset, p)
			}
			continue
		}
		if items == nil {
			objects++
			out.WriteString("---\n" + doc)
			if !strings.HasSuffix(doc, "\n") {
				out.WriteString("\n")
			}
			continue
		}
		lists++
		for _, item := range items {
			y, err := yaml.Marshal(item)
			if err != nil {
				return nil, "", fmt.Errorf("YAML document %d: %w", i+offset, err)
			}
			objects++
			out.WriteString("---\n" + string(y))
		}
	}
	switch {
	case problem != "" || objects == 0:
		return nil, problem, nil
	case lists == 0:
		return data, "", nil
	}
	return []byte(out.String()), "", nil
}

// listItems returns the objects of v when it is a list (a mapping with
// an items key), its nested lists expanded, or a problem when an item is
// not an object or items is not a sequence. It returns nil, "" for any
// other v.
func listItems(v any) ([]any, string) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ""
	}
	raw, ok := m["items"]
	if !ok || raw == nil {
		return nil, ""
	}
	seq, ok := raw.([]any)
	if !ok {
		return nil, "is a list whose items are not a sequence"
	}
	out := []any{}
	for j, item := range seq {
		nested, p := listItems(item)
		if p == "" && nested == nil {
			p = objectProblem(item)
			nested = []any{item}
		}
		if p != "" {
			return nil, fmt.Sprintf("item %d %s", j+1, p)
		}
		out = append(out, nested...)
	}
	return out, ""
}

// objectProblem says why v, a decoded YAML document, is not a Kubernetes
// object, or returns "" when it is one.
func objectProblem(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return "is not a mapping"
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	switch {
	case apiVersion == "" && kind == "":
		return "has no apiVersion and no kind"
	case apiVersion == "":
		return "has no apiVersion"
	case kind == "":
		return "has no kind"
	}
	return ""
}

// rawWarnings returns a warning for each raw YAML file of bundle b
// (manifest m) that Chart skips because a document is not a Kubernetes
// object, naming the file (repository path) and the document. It looks at
// the files as they are in the repository, before any yaml.overlays; files
// that are not valid YAML are left to Chart, which reports them.
func rawWarnings(b Bundle, m Manifest) []string {
	var out []string
	for _, r := range rawManifests(m) {
		data, err := r.Data()
		if err != nil {
			continue
		}
		if _, problem, err := objectDocuments(data); err == nil && problem != "" {
			out = append(out, fmt.Sprintf("%s: %s; the file is skipped, as Fleet skips it", path.Join(b.Dir, r.Name), problem))
		}
	}
	return out
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
