package render_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/render"
)

// TestForClusterTemplateBudget: a template bomb in fleet.yaml values is
// refused for the cluster at once, as Invalid, naming the bundle, the
// cluster, the file and the value.
func TestForClusterTemplateBudget(t *testing.T) {
	root := writeBundle(t, "namespace: app\nhelm:\n  values:\n    bomb: ${ repeat 2000000000 \"x\" }\n", nil)
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	start := time.Now()
	_, err = render.ForCluster(b, m.ID(), prodCluster, []api.TargetSelector{{ClusterGroup: "default"}})
	assert.Less(t, time.Since(start), time.Second)
	var be *fleetyaml.TemplateBudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, outcome.Invalid, be.Class())
	assert.EqualError(t, err, "bundle repo-app: cluster c1: app/fleet.yaml: helm.values: bomb: "+
		"template exceeds its memory budget of 64 MiB")
}
