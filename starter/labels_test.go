package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLabels(t *testing.T) {
	set, remove, err := parseLabels([]string{"env=prod", "tier=", "region-"}, true)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"env": "prod", "tier": ""}, set)
	assert.Equal(t, []string{"region"}, remove)

	_, _, err = parseLabels([]string{"region-"}, false)
	assert.ErrorContains(t, err, `label "region-": want key=value`, "cluster add takes no removals")
	_, _, err = parseLabels([]string{"novalue"}, true)
	assert.ErrorContains(t, err, "want key=value or key-")
}

func TestFormatLabels(t *testing.T) {
	assert.Equal(t, "<none>", formatLabels(nil))
	assert.Equal(t, "a=1,b=2", formatLabels(map[string]string{"b": "2", "a": "1"}))
}

func TestReadDocuments_OrdersAndRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := dir + "/" + name
		require.NoError(t, writeFile(p, doc))
		return p
	}
	gr := write("a-gitrepo.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'https://g/a.git'}\n")
	cg := write("b-group.yaml", "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: default}\nspec: {selector: {}}\n")
	docs, err := readDocuments(nil, []string{gr, cg})
	require.NoError(t, err)
	require.Len(t, docs, 2)
	assert.Equal(t, "ClusterGroup", docs[0].Kind(), "groups are applied before the GitRepos that target them")

	docs, err = readDocuments(nil, []string{dir})
	require.NoError(t, err)
	assert.Len(t, docs, 2, "a directory means its YAML files")

	bad := write("c-bad.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: bad}\nspec: {}\n")
	_, err = readDocuments(nil, []string{gr, bad})
	assert.ErrorContains(t, err, "c-bad.yaml#1")
	assert.ErrorContains(t, err, "spec.repo: Required value")
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
