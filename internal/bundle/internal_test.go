package bundle

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIgnoreRules(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write(".fleetignore", "  *.md  \n# comment\n!keep.md\ntmp/\n/top.yaml\ndocs/*.txt\n")
	write("app/.fleetignore", "secret?.yaml\n")
	r, err := openRepo(root)
	require.NoError(t, err)
	ig := newIgnorer(r, Limits{}.files())

	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{".", true, false},
		{"README.md", false, true},
		{"app/deep/notes.md", false, true}, // base-name rule applies at any depth
		{"app/keep.md", false, true},       // negation is not supported
		{"tmp", true, true},                // directory rule
		{"app/tmp", true, true},            // at any depth
		{"tmp", false, false},              // but only for directories
		{"top.yaml", false, true},          // anchored to the .fleetignore directory
		{"app/top.yaml", false, false},     // so not below it
		{"docs/a.txt", false, true},        // pattern with a slash: relative path
		{"app/docs/a.txt", false, false},   // relative to the root only
		{"app/secret1.yaml", false, true},  // app/.fleetignore applies in app
		{"app/sub/secret2.yaml", false, true},
		{"secret1.yaml", false, false}, // but not above it
		{"other/secret1.yaml", false, false},
		{"app/x.yaml", false, false},
	}
	for _, tt := range tests {
		got, err := ig.ignored(tt.path, tt.isDir)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, tt.path)
	}
}

func TestParseIgnoreErrors(t *testing.T) {
	_, err := parseIgnore([]byte("ok\n\n[bad\n"))
	require.ErrorContains(t, err, "line 3")
	rules, err := parseIgnore([]byte("/\n   \n"))
	require.NoError(t, err)
	assert.Empty(t, rules)
}

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a: 1\n", []string{"a: 1\n"}},
		{"---\na: 1\n", []string{"", "a: 1\n"}},
		{"a: 1\n---\nb: 2\n---\n", []string{"a: 1\n", "b: 2\n", ""}},
		{"a: 1\n--- # c\nb: 2\n", []string{"a: 1\n", "# c\nb: 2\n"}},
		{"a: |\n  ---\n  x\n", []string{"a: |\n  ---\n  x\n"}},
		{"a: 1\r\n---\r\nb: 2\r\n", []string{"a: 1\r\n", "b: 2\r\n"}},
		{"----\n", []string{"----\n"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, splitDocuments(tt.in), "%q", tt.in)
	}
}

func TestObjectDocuments(t *testing.T) {
	const obj = "apiVersion: v1\nkind: ConfigMap\n"
	tests := []struct {
		name string
		in   string
		// want is the file's output ("" when it is skipped), problem why
		// it is skipped.
		want, problem string
		wantErr       bool
	}{
		{"all objects: unchanged", "# c\n" + obj + "---\n" + obj, "# c\n" + obj + "---\n" + obj, "", false},
		{"comments and empty documents are not invalid", "---\n# x\n---\n" + obj + "---\n", "---\n# x\n---\n" + obj + "---\n", "", false},
		{"non-object skips the whole file", "a: 1\n---\n" + obj, "", "document 1 has no apiVersion and no kind", false},
		{"missing kind skips the whole file", obj + "---\napiVersion: v1\n", "", "document 2 has no kind", false},
		{"missing apiVersion", obj + "---\n" + obj + "---\nkind: X\n", "", "document 3 has no apiVersion", false},
		{"the first problem is named", "apiVersion: v1\n---\nkind: X\n", "", "document 1 has no kind", false},
		{"list", "- 1\n---\n" + obj, "", "document 1 is not a mapping", false},
		{"a leading --- starts document 1", "# header\n---\nkind: X\n", "", "document 1 has no apiVersion", false},
		{"empty documents are counted", obj + "---\n---\nkind: X\n", "", "document 3 has no apiVersion", false},
		{"only comments", "# c\n", "", "", false},
		{"empty", "", "", "", false},
		{"a v1 List is expanded into its items", "# c\n" + obj + "---\napiVersion: v1\nkind: List\nmetadata: {}\nitems:\n" +
			"- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n",
			"---\n# c\n" + obj + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n" +
				"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n", "", false},
		{"a typed list and a nested list", "apiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: List\n" +
			"  items:\n  - {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: v1, kind: ConfigMap, data: {k: v}}\n",
			"---\n" + obj + "---\napiVersion: v1\ndata:\n  k: v\nkind: ConfigMap\n", "", false},
		{"an empty list deploys nothing", "apiVersion: v1\nkind: List\nitems: []\n", "", "", false},
		{"a list item that is not an object", obj + "---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n" +
			"- {apiVersion: v1}\n", "", "document 2 item 2 has no kind", false},
		{"items that are not a sequence", "apiVersion: v1\nkind: List\nitems: {a: 1}\n", "",
			"document 1 is a list whose items are not a sequence", false},
		{"invalid yaml", obj + "---\na: [\n", "", "", true},
		{"invalid yaml after an invalid document is still an error", "a: 1\n---\na: [\n", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem, err := objectDocuments([]byte(tt.in))
			if tt.wantErr {
				require.ErrorContains(t, err, "document 2")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.problem, problem)
		})
	}
}

func TestMergeValues(t *testing.T) {
	base := map[string]any{"a": 1, "m": map[string]any{"x": 1, "y": 1}, "l": []any{1}, "s": map[string]any{"k": 1}}
	overlay := map[string]any{"b": 2, "m": map[string]any{"y": 2, "z": 2}, "l": []any{2}, "s": "scalar"}
	got := fleetyaml.MergeValues(base, overlay)
	assert.Equal(t, map[string]any{
		"a": 1, "b": 2, "m": map[string]any{"x": 1, "y": 2, "z": 2}, "l": []any{2}, "s": "scalar",
	}, got)
	assert.Equal(t, map[string]any{"x": 1, "y": 1}, base["m"], "base is not modified")
	assert.Equal(t, map[string]any{"k": 1}, fleetyaml.MergeValues(nil, map[string]any{"k": 1}))
}

func TestChartManifestPath(t *testing.T) {
	tests := []struct{ dir, chart, want string }{
		{".", "chart", "chart"},
		{"app", "app/chart", "chart"},
		{"app", "app", "."},
		{"app", "charts/web", ".chart/web"},
		{"a/b", "a/c/web", ".chart/web"},
		{"app", ".", ".chart/chart"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, chartManifestPath(tt.dir, tt.chart), "%s + %s", tt.dir, tt.chart)
	}
}

func TestIsRemoteChart(t *testing.T) {
	for _, c := range []string{
		"https://x/c.tgz", "http://x/c.tgz", "oci://r/c", "git::https://github.com/x/y", "git@github.com:x/y.git",
		"github.com/x/y//c", "gitlab.com/x/y", "bitbucket.org/x/y", "s3::https://b/c.tgz",
	} {
		assert.True(t, remoteChart(&HelmOptions{Chart: c}), c)
	}
	for _, c := range []string{"", ".", "./chart", "../charts/web", "charts/github.com"} {
		assert.False(t, remoteChart(&HelmOptions{Chart: c}), c)
	}
}
