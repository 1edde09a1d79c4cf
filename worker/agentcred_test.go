package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
)

// An agent's gateway credential outlives the agent: in a file outside a
// pod, in a Secret of its namespace in one (a pod's state dir does not
// survive it). Nothing kept reads as "".
func TestCredentialStores(t *testing.T) {
	file := fileCredential(filepath.Join(t.TempDir(), "sub", "credential"))
	for _, s := range []credentialStore{file, secretCredential{cs: fake.NewClientset(), namespace: "flotilla-system"}} {
		t.Run(s.String(), func(t *testing.T) {
			ctx := context.Background()
			got, err := s.load(ctx)
			require.NoError(t, err)
			assert.Empty(t, got)
			require.NoError(t, s.save(ctx, "flga1.one"))
			require.NoError(t, s.save(ctx, "flga1.two"), "registered again: replaced")
			got, err = s.load(ctx)
			require.NoError(t, err)
			assert.Equal(t, "flga1.two", got)
		})
	}
	info, err := os.Stat(string(file))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "only the agent reads its credential")
}
