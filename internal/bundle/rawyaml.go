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
// returns data itself, or nil when no document is an object. Otherwise the
// whole file is skipped, as Fleet's agent skips a file with such a
// document (its objects too), whereas Helm would fail the install: it
// returns nil, and problem describes the first such document ("document 2
// has no kind"). Typical cases are a stray config file or a values file in
// a raw YAML bundle. A document that is not valid YAML is an error.
//
// Documents are numbered from 1, as a reader counts them: comments before
// a leading "---" are not a document.
func objectDocuments(data []byte) (docs []byte, problem string, err error) {
	split := splitDocuments(string(data))
	objects := 0
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
		if p := objectProblem(v); p != "" {
			if problem == "" {
				problem = fmt.Sprintf("document %d %s", i+offset, p)
			}
			continue
		}
		objects++
	}
	if problem != "" || objects == 0 {
		return nil, problem, nil
	}
	return data, "", nil
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
