package tests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// A GitRepo on a password-protected Git server deploys with credentials
// from a Secret applied with `flotilla apply`, and neither that password
// nor any cluster's kubeconfig token appears in any workflow history or in
// the worker's logs.
func testPrivateRepoSecretsStayOut(t *testing.T, f *fleet) {
	const password = "s3cret-Pa55word-9f2c"
	git := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "bot", Password: password})
	repo := git.CreateRepo(t, "private", map[string]string{"fleet.yaml": fleetYAML("private-ns"), "cm.yaml": configMapDoc("private", "v1")})

	// Without the secret the GitRepo reports the missing credentials.
	f.apply(t, gitRepoDoc("private", repo.URL(), selectorTarget("env", "dev")+"  clientSecretName: git-creds\n"))
	st := f.waitFor(t, "private", "an error naming the missing secret", func(st status.GitRepo) bool { return st.Error != "" })
	assert.Contains(t, st.Error, "git-creds")

	f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-creds\ntype: kubernetes.io/basic-auth\nstringData:\n  username: bot\n  password: "+password+"\n")
	f.cli(t, "sync", "private")
	f.waitFor(t, "private", "deployed with the stored credentials", settledAt(repo.Head(t), 2))
	_, ok := f.configMap(t, "cluster-1", "private-ns", "private")
	assert.True(t, ok)

	secrets := []string{password}
	for _, c := range f.clusters {
		cfg, err := clientcmd.Load(c.Kubeconfig)
		require.NoError(t, err)
		for _, auth := range cfg.AuthInfos {
			if auth.Token != "" {
				secrets = append(secrets, auth.Token)
			}
		}
	}
	require.Greater(t, len(secrets), 1, "the clusters authenticate with tokens")

	assertNotInHistoriesOrLogs(t, f, secrets, 5)
	f.remove(t, "private")
}
