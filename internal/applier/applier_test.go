package applier

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

func TestVerb(t *testing.T) {
	assert.Equal(t, "created", Verb(true, true))
	assert.Equal(t, "created", Verb(true, false))
	assert.Equal(t, "configured", Verb(false, true))
	assert.Equal(t, "unchanged", Verb(false, false))
}

// TestWorkflowID: each kind's workflow, as the CLI names them; kinds kept
// elsewhere have none.
func TestWorkflowID(t *testing.T) {
	tests := []struct{ kind, want string }{
		{api.KindGitRepo, "gitrepo/team-a/app"},
		{api.KindHelmOp, "helmop/team-a/app"},
		{api.KindSecret, "secret/team-a/app"},
		{api.KindConfigMap, "configmap/team-a/app"},
		{api.KindClusterGroup, "clustergroup/app"},
		{api.KindCluster, "cluster/app"},
		{api.KindPolicy, ""},
		{api.KindGitRepoRestriction, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, WorkflowID(tt.kind, "team-a", "app"), tt.kind)
	}
}

// TestSealSecret: a Secret is sealed to the sealer's key: its record
// names its keys, never a value, and opens to the content.
func TestSealSecret(t *testing.T) {
	k, err := keyring.Generate()
	require.NoError(t, err)
	ring, err := keyring.New(k)
	require.NoError(t, err)
	opener, err := seal.NewOpener(ring)
	require.NoError(t, err)
	a := &Applier{Sealer: KeySealer{Key: opener.Newest()}}
	rec, err := a.SealSecret(context.Background(), api.Secret{Metadata: api.ObjectMeta{Name: "git", Namespace: "team-a"},
		Type: "kubernetes.io/basic-auth", Data: map[string][]byte{"username": []byte("bot"), "password": []byte("s3cret-Pa55")}})
	require.NoError(t, err)
	assert.Equal(t, []string{"password", "username"}, rec.Keys)
	assert.Equal(t, opener.Newest().ID, rec.Sealed.KeyID)
	js, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.NotContains(t, string(js), "s3cret-Pa55")
	plain, err := opener.Open(rec.Sealed)
	require.NoError(t, err)
	assert.Contains(t, string(plain), "s3cret-Pa55")

	_, err = (&Applier{}).SealSecret(context.Background(), api.Secret{Metadata: api.ObjectMeta{Name: "git"}})
	assert.EqualError(t, err, "seal a Secret: no sealer configured")
	_, err = (&Applier{}).Apply(context.Background(), api.Document{})
	assert.ErrorIs(t, err, ErrUnsupported)
}
