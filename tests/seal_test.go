package tests

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestSealedSecrets: a state dir written by an older Flotilla (plain
// kubeconfig and Secret files) is imported into Temporal, sealed, at the
// controller's first start and left untouched; a private GitRepo then
// deploys with both. A new sealing key takes over: `flotilla secrets
// rotate` re-seals everything to it, after which the old key can go and
// deploys still work.
func TestSealedSecrets(t *testing.T) {
	f := startFleet(t, 1, 0)
	c1 := f.clusters[0]
	const password = "legacy-Pa55-7d1e"
	git := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "bot", Password: password})
	repo := git.CreateRepo(t, "legacy", map[string]string{"fleet.yaml": fleetYAML("legacy-ns"), "cm.yaml": configMapDoc("legacy", "v1")})

	// What an older CLI wrote on the controller's host.
	kubeconfigs := cluster.NewStore(filepath.Join(f.stateDir, "clusters"))
	hash, err := kubeconfigs.SaveFile(c1.Name, c1.KubeconfigPath, "")
	require.NoError(t, err)
	secrets := cluster.NewSecretStore(filepath.Join(f.stateDir, "secrets"))
	sec := api.Secret{Type: "kubernetes.io/basic-auth", StringData: map[string]string{"username": "bot", "password": password}}
	sec.Metadata.Name, sec.Metadata.Namespace = "legacy-creds", api.DefaultNamespace
	require.NoError(t, secrets.Save(sec))
	before := snapshot(t, filepath.Join(f.stateDir, "clusters"), filepath.Join(f.stateDir, "secrets"))
	// ... and the older registration: a hash, no sealed kubeconfig.
	c := f.w.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = temporalx.ApplyCluster(ctx, c, protocol.DefaultTaskQueue, c1.Name,
		protocol.ClusterApply{Labels: map[string]string{"env": "dev"}, SetLabels: true, KubeconfigHash: hash})
	require.NoError(t, err)

	f.w.proc.Stop()
	f.restart(t)
	waitLog(t, f.w.proc, `Imported the state dir's kubeconfigs and secrets`, time.Minute)
	c = f.w.client(t)
	assert.Equal(t, before, snapshot(t, filepath.Join(f.stateDir, "clusters"), filepath.Join(f.stateDir, "secrets")),
		"the old files are left as they were")
	key, err := cluster.CurrentKey(ctx, c)
	require.NoError(t, err)
	box := sealedKubeconfig(ctx, t, c, c1.Name)
	assert.Equal(t, key.ID, box.KeyID)

	f.apply(t, gitRepoDoc("legacy", repo.URL(), selectorTarget("env", "dev")+"  clientSecretName: legacy-creds\n"))
	f.waitFor(t, "legacy", "deployed with the imported kubeconfig and credentials", settledAt(repo.Head(t), 1))

	// Rotation: a newer key joins the keyring; the controller restarts and
	// publishes it; the CLI seals to it; rotate moves the rest.
	keysDir := filepath.Join(f.stateDir, "seal-keys")
	newKey, err := keyring.Generate()
	require.NoError(t, err)
	newKey.ID = "fk-29991231t235959z"
	require.NoError(t, keyring.WriteKey(keysDir, newKey))
	f.w.proc.Stop()
	f.restart(t)
	c = f.w.client(t)
	out := f.cli(t, "secrets", "public-key")
	assert.Contains(t, out, newKey.ID+":")
	out = f.cli(t, "secrets", "rotate")
	assert.Contains(t, out, "re-sealed 1 kubeconfigs and 1 secrets to key "+newKey.ID)
	assert.Equal(t, newKey.ID, sealedKubeconfig(ctx, t, c, c1.Name).KeyID)
	out = f.cli(t, "secrets", "rotate")
	assert.Contains(t, out, "re-sealed 0 kubeconfigs and 0 secrets to key "+newKey.ID+" (2 already were)")

	// The old key can go now.
	require.NoError(t, os.Remove(filepath.Join(keysDir, key.ID)))
	f.w.proc.Stop()
	f.restart(t)
	repo.Commit(t, map[string]string{"cm.yaml": configMapDoc("legacy", "v2")}, "v2")
	f.sync(t, "legacy")
	f.waitFor(t, "legacy", "deployed after the old key was removed", settledAt(repo.Head(t), 1))
	cm, ok := f.configMap(t, c1.Name, "legacy-ns", "legacy")
	require.True(t, ok)
	assert.Equal(t, "v2", cm.Data["value"])

	// A deleted Secret is gone for the controllers.
	f.cli(t, "secrets", "delete", "legacy-creds")
	repo.Commit(t, map[string]string{"cm.yaml": configMapDoc("legacy", "v3")}, "v3")
	_, _, _ = f.cliErr(t, "sync", "legacy")
	st := f.waitFor(t, "legacy", "an error naming the deleted secret", func(st status.GitRepo) bool { return st.Error != "" })
	assert.Contains(t, st.Error, "legacy-creds")
}

func sealedKubeconfig(ctx context.Context, t *testing.T, c client.Client, name string) seal.Box {
	t.Helper()
	v, err := c.QueryWorkflow(ctx, protocol.ClusterID(name), "", protocol.QueryKubeconfig)
	require.NoError(t, err)
	var box *seal.Box
	require.NoError(t, v.Get(&box))
	require.False(t, box.IsZero(), "cluster %s has a sealed kubeconfig", name)
	return *box
}

// snapshot maps every file under dirs to its content.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		require.NoError(t, filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			out[p] = string(b)
			return err
		}))
	}
	return out
}
