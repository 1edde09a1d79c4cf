package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// TestGitRepoWorkflow_SourceQuery: the source query answers the spec and
// the commits a controller renders again when its store misses content;
// before the first apply there is nothing to render.
func TestGitRepoWorkflow_SourceQuery(t *testing.T) {
	env, f := gitRepoEnv()
	querySource := func() (protocol.GitRepoSource, error) {
		v, err := env.QueryWorkflow(protocol.QuerySource)
		if err != nil {
			return protocol.GitRepoSource{}, err
		}
		var src protocol.GitRepoSource
		require.NoError(t, v.Get(&src))
		return src, nil
	}
	env.RegisterDelayedCallback(func() {
		_, err := querySource()
		assert.ErrorContains(t, err, "not applied")
	}, 500*time.Millisecond)
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, time.Second)
	env.RegisterDelayedCallback(func() {
		src, err := querySource()
		require.NoError(t, err)
		assert.Equal(t, testGitRepo(true).Spec.Repo, src.Spec.Repo)
		assert.True(t, src.Spec.KeepResources)
		assert.Equal(t, int64(1), src.Generation)
		assert.Equal(t, f.commit, src.Commit)
		assert.Equal(t, []string{f.commit}, src.Commits())
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 6*time.Second)
	runGitRepo(t, env)
}
