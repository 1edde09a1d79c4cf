package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/dirarchive"
)

func TestPlanFlags_Request(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("kind: ConfigMap\n"), 0o644))
	req, err := planFlags{path: dir, clusters: []string{"c1"}}.request("ns", "app")
	require.NoError(t, err)
	assert.Equal(t, dir, req.Path)
	assert.Equal(t, []string{"c1"}, req.Clusters)
	out := t.TempDir()
	require.NoError(t, dirarchive.Unpack(req.Archive, out))
	assert.FileExists(t, filepath.Join(out, "cm.yaml"))

	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(dir, "link.yaml")))
	_, err = planFlags{path: dir}.request("ns", "app")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"link.yaml"`)
}

func TestPlanCommand_ExclusiveSources(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetArgs([]string{"plan", "app", "--commit", "abc1234", "--branch", "next"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[branch commit] were all set")
}
