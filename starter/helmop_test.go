package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applyOffline runs `flotilla apply -f` on doc with no Temporal server
// to reach: what is checked before talking to it shows on stderr or in
// the error.
func applyOffline(t *testing.T, doc string) (stderr string, err error) {
	path := filepath.Join(t.TempDir(), "op.yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"--temporal-address", "127.0.0.1:1", "--dial-timeout", "100ms", "apply", "-f", path})
	err = root.Execute()
	return errOut.String(), err
}

// A HelmOp's bundle keys are checked as fleet.yaml's are: unknown keys
// warn, values of the wrong type are refused before anything is applied.
func TestApplyChecksHelmOpBundle(t *testing.T) {
	stderr, err := applyOffline(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata: {name: web}
spec:
  helm: {repo: "https://charts.example", chart: web, version: "~1", relaseName: x}
  pollingIntreval: 1m
`)
	require.Error(t, err, "nothing answers at 127.0.0.1:1")
	assert.Contains(t, stderr, `HelmOp fleet-default/web: unknown field "spec.helm.relaseName" (ignored)`)
	assert.Contains(t, stderr, `HelmOp fleet-default/web: unknown field "spec.pollingIntreval" (ignored)`)

	_, err = applyOffline(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata: {name: web}
spec:
  helm: {repo: "https://charts.example", chart: web, maxHistory: many}
`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HelmOp fleet-default/web")
	assert.Contains(t, err.Error(), "helm.maxHistory")
}
