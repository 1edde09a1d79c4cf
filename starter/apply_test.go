package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `flotilla apply` warns about every field it does not know, naming the
// file, the document and the field, before it talks to Temporal, the way
// kubectl does; the document is still applied.
func TestApplyWarnsAboutUnknownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: apps}
spec:
  repo: https://example.com/apps.git
  pollingIntreval: 30s
`), 0o600))
	root := newRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"--temporal-address", "127.0.0.1:1", "--dial-timeout", "100ms", "apply", "-f", path})
	err := root.Execute()
	require.Error(t, err, "nothing answers at 127.0.0.1:1")
	assert.Contains(t, stderr.String(),
		`Warning: `+path+`#1: GitRepo fleet-default/apps: unknown field "spec.pollingIntreval" (ignored)`)
}
