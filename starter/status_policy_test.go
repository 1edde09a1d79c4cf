package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// `flotilla status` of a GitRepo a Policy refuses names the rule once,
// in its own line, and the state says why nothing rolls out.
func TestPrintStatus_PolicyViolation(t *testing.T) {
	const v = `Policy team-a/strict: gitRepo.allowedRepoPatterns [https://git\.example\.com/.*] do not match repo "https://evil.example/x.git"`
	st := status.GitRepo{Namespace: "team-a", Name: "app", Repo: "https://evil.example/x.git", PolicyViolation: v}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	out := buf.String()
	assert.Contains(t, out, "State:    PolicyViolation  0/0 bundle deployments ready")
	assert.Contains(t, out, "Refused:  "+v+" (nothing is fetched or deployed until the spec or the policy changes)\n")
	assert.Equal(t, 1, strings.Count(out, v), "the conditions do not repeat it:\n%s", out)
}
