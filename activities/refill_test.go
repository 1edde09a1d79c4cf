package activities_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// reRendered is the line a controller logs each time it renders a commit
// again for content its store misses.
const reRendered = "Rendered commit again for missing content"

// fakeTemporal answers what refills ask Temporal: the GitRepo's source and
// the clusters' records (queries), and the listing of clusters and groups
// (visibility). Any other call panics on the nil embedded client. A real
// server would make this package's -race build link the Temporal server.
type fakeTemporal struct {
	client.Client
	mu       sync.Mutex
	gitRepo  string
	source   protocol.GitRepoSource
	clusters []protocol.ClusterRecord
}

func (f *fakeTemporal) QueryWorkflow(_ context.Context, id, _, query string, _ ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == f.gitRepo && query == protocol.QuerySource {
		return encoded(f.source)
	}
	for _, c := range f.clusters {
		if id == protocol.ClusterID(c.Name) && query == protocol.QueryStatus {
			return encoded(c)
		}
	}
	return nil, serviceerror.NewNotFound("no workflow " + id)
}

func (f *fakeTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	if req.GetQuery() == temporalx.RunningOfType(protocol.ClusterWorkflow) {
		for _, c := range f.clusters {
			resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{
				Execution: &commonpb.WorkflowExecution{WorkflowId: protocol.ClusterID(c.Name)}})
		}
	}
	return resp, nil
}

// change edits what the fake answers.
func (f *fakeTemporal) change(fn func(src *protocol.GitRepoSource, clusters []protocol.ClusterRecord)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.source, f.clusters)
}

func encoded(v any) (converter.EncodedValue, error) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	return client.NewValue(p), err
}

// refillFixture is a GitRepo with two raw bundles, "app" (customized for
// clusters labelled env=dev) and "web", rendered and targeted at one
// push-mode cluster by a first controller, as a rollout plans it.
type refillFixture struct {
	ref      activities.GitRepoRef
	spec     api.GitRepoSpec
	commit   string
	temporal *fakeTemporal
	// rendered are the bundles Render returned, planned the bundles
	// TargetBundles planned for cluster-1, both by the first controller.
	rendered, planned map[string]activities.Bundle
}

func newRefillFixture(t *testing.T) *refillFixture {
	t.Helper()
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", map[string]string{
		"app/fleet.yaml": "defaultNamespace: app-ns\ntargetCustomizations:\n- name: dev\n  clusterSelector:\n    matchLabels:\n      env: dev\n  namespaceLabels:\n    tier: dev\n",
		"app/cm.yaml":    configMapYAML("app", "one"),
		"web/fleet.yaml": "defaultNamespace: web-ns\n",
		"web/cm.yaml":    configMapYAML("web", "two"),
	})
	f := &refillFixture{
		ref:    activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"},
		spec:   api.GitRepoSpec{Repo: repo.URL(), Targets: []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{}}}},
		commit: repo.Head(t),
	}
	f.temporal = &fakeTemporal{gitRepo: protocol.GitRepoID(f.ref.Namespace, f.ref.Name),
		clusters: []protocol.ClusterRecord{{Name: "cluster-1", Labels: map[string]string{"env": "dev"}, KubeconfigHash: "h"}}}
	f.temporal.source = protocol.GitRepoSource{Spec: f.spec, Generation: 1, Commit: f.commit, LatestCommit: f.commit}

	first := f.controller(t, t.TempDir(), zaptest.NewLogger(t))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(first)
	val, err := env.ExecuteActivity(first.Render, activities.RenderInput{GitRepo: f.ref, Spec: f.spec, Commit: f.commit})
	require.NoError(t, err)
	var rendered activities.RenderResult
	require.NoError(t, val.Get(&rendered))
	val, err = env.ExecuteActivity(first.TargetBundles, activities.BundleTargetsInput{GitRepo: f.ref, Spec: f.spec,
		Commit: f.commit, Bundles: rendered.Bundles})
	require.NoError(t, err)
	var targets activities.TargetsResult
	require.NoError(t, val.Get(&targets))
	require.Len(t, targets.Matched, 1)
	f.rendered, f.planned = byPath(rendered.Bundles), byPath(targets.Matched[0].Bundles)
	require.Len(t, f.planned, 2)
	return f
}

func configMapYAML(name, value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  value: " + value + "\n"
}

func byPath(bs []activities.Bundle) map[string]activities.Bundle {
	out := map[string]activities.Bundle{}
	for _, b := range bs {
		out[b.Path] = b
	}
	return out
}

// controller returns a controller replica's activities whose state dir
// (content store and Git cache) is dir.
func (f *refillFixture) controller(t *testing.T, dir string, logger *zap.Logger) *activities.Activities {
	t.Helper()
	store, err := content.New(dir + "/content")
	require.NoError(t, err)
	return &activities.Activities{Client: f.temporal, Content: store, Git: gitsource.NewCache(dir + "/git"), Logger: logger}
}

// manifestOf and optionsOf ask for a planned bundle's manifest, and its
// options on cluster-1, as a deploy does.
func (f *refillFixture) manifestOf(path string) activities.RefillInput {
	b := f.planned[path]
	return activities.RefillInput{GitRepo: f.ref, Commit: f.commit, Bundle: b.Name, ManifestID: b.ManifestID}
}

func (f *refillFixture) optionsOf(path string) activities.RefillInput {
	b := f.planned[path]
	return activities.RefillInput{GitRepo: f.ref, Commit: f.commit, Bundle: b.Name, BundleKey: b.BundleKey,
		Cluster: "cluster-1", OptionsHash: b.OptionsHash}
}

// holds reports whether a store over dir holds what in asks for.
func holds(t *testing.T, dir string, in activities.RefillInput) bool {
	t.Helper()
	store, err := content.New(dir + "/content")
	require.NoError(t, err)
	if in.ManifestID != "" {
		if _, err := store.GetManifest(in.ManifestID); err != nil {
			require.ErrorIs(t, err, content.ErrNotFound)
			return false
		}
	}
	if in.OptionsHash != "" {
		if _, err := store.GetOptions(in.OptionsHash); err != nil {
			require.ErrorIs(t, err, content.ErrNotFound)
			return false
		}
	} else if in.BundleKey != "" {
		if _, err := store.GetBundle(in.BundleKey); err != nil {
			require.ErrorIs(t, err, content.ErrNotFound)
			return false
		}
	}
	return true
}

// TestRefill_FromEmptyStore: a second controller whose state dir is empty
// re-derives, from Git and the cluster's record, the manifests and
// options the first one planned, and stores them.
func TestRefill_FromEmptyStore(t *testing.T) {
	f := newRefillFixture(t)
	tests := []struct {
		name string
		in   func() activities.RefillInput
	}{
		{"manifest", func() activities.RefillInput { return f.manifestOf("app") }},
		{"options of a push-mode cluster", func() activities.RefillInput { return f.optionsOf("app") }},
		{"options of a watched release (no commit, no bundle key)", func() activities.RefillInput {
			in := f.optionsOf("app")
			in.Commit, in.BundleKey = "", ""
			return in
		}},
		{"bundle of a rollout's targeting (spec given)", func() activities.RefillInput {
			b := f.rendered["web"]
			return activities.RefillInput{GitRepo: f.ref, Commit: f.commit, Spec: &f.spec, Bundle: b.Name, BundleKey: b.BundleKey}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := tt.in()
			require.False(t, holds(t, dir, in))
			require.NoError(t, activities.Refill(f.controller(t, dir, zaptest.NewLogger(t)))(context.Background(), in))
			assert.True(t, holds(t, dir, in))
		})
	}
}

// TestTargetBundles_RefillsBundles: TargetBundles on a controller that
// did not render the commit plans what the renderer's would.
func TestTargetBundles_RefillsBundles(t *testing.T) {
	f := newRefillFixture(t)
	second := f.controller(t, t.TempDir(), zaptest.NewLogger(t))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(second)
	rendered := []activities.Bundle{f.rendered["app"], f.rendered["web"]}
	val, err := env.ExecuteActivity(second.TargetBundles, activities.BundleTargetsInput{GitRepo: f.ref, Spec: f.spec,
		Commit: f.commit, Bundles: rendered})
	require.NoError(t, err)
	var targets activities.TargetsResult
	require.NoError(t, val.Get(&targets))
	require.Len(t, targets.Matched, 1)
	assert.Equal(t, f.planned, byPath(targets.Matched[0].Bundles))
}

// TestTargetBundles_RenderedWithAnotherSpec: TargetBundles that cannot
// re-derive a bundle it misses fails non-retryably (ContentChanged),
// naming the bundle: retrying the same input cannot succeed.
func TestTargetBundles_RenderedWithAnotherSpec(t *testing.T) {
	f := newRefillFixture(t)
	second := f.controller(t, t.TempDir(), zaptest.NewLogger(t))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(second)
	spec := f.spec
	spec.TargetNamespace = "elsewhere"
	_, err := env.ExecuteActivity(second.TargetBundles, activities.BundleTargetsInput{GitRepo: f.ref, Spec: spec,
		Commit: f.commit, Bundles: []activities.Bundle{f.rendered["app"], f.rendered["web"]}})
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, activities.ErrTypeContentChanged, ae.Type())
	assert.True(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "bundle repo-app of GitRepo fleet-default/repo at commit "+f.commit[:12]+" renders to bundle")
}

// TestRefill_ChangedSinceRollout: content that derives to something else
// now than when the rollout planned it is refused, naming the bundle (and
// the cluster) and why, and nothing is stored under the ID asked for.
func TestRefill_ChangedSinceRollout(t *testing.T) {
	tests := []struct {
		name string
		// change edits the GitRepo and clusters as Temporal shows them.
		change func(f *refillFixture, src *protocol.GitRepoSource, clusters []protocol.ClusterRecord)
		// in is what is asked for.
		in func(f *refillFixture) activities.RefillInput
		// want are parts of the message.
		want []string
	}{
		{
			name: "bundle no longer among the spec's paths",
			change: func(_ *refillFixture, src *protocol.GitRepoSource, _ []protocol.ClusterRecord) {
				src.Spec.Paths = []string{"web"}
			},
			in:   func(f *refillFixture) activities.RefillInput { return f.manifestOf("app") },
			want: []string{"renders no bundle repo-app", "the GitRepo's spec (or a chart it pulls) changed since this rollout was planned"},
		},
		{
			name: "manifest the commit does not render",
			in: func(f *refillFixture) activities.RefillInput {
				in := f.manifestOf("app")
				// As planned from another commit of the file.
				in.ManifestID = bundle.Manifest{Resources: []bundle.Resource{{Name: "cm.yaml", Content: configMapYAML("app", "zero")}}}.ID()
				return in
			},
			want: []string{"bundle repo-app of GitRepo fleet-default/repo at commit", "renders to manifest"},
		},
		{
			name: "options after the GitRepo's spec changed",
			change: func(_ *refillFixture, src *protocol.GitRepoSource, _ []protocol.ClusterRecord) {
				src.Spec.TargetNamespace = "elsewhere"
			},
			in:   func(f *refillFixture) activities.RefillInput { return f.optionsOf("web") },
			want: []string{"bundle repo-web", "on cluster cluster-1", "the cluster's labels or the GitRepo's spec changed"},
		},
		{
			name: "options after the cluster's labels changed",
			change: func(_ *refillFixture, _ *protocol.GitRepoSource, clusters []protocol.ClusterRecord) {
				clusters[0].Labels = map[string]string{"env": "prod"}
			},
			in:   func(f *refillFixture) activities.RefillInput { return f.optionsOf("app") },
			want: []string{"bundle repo-app", "on cluster cluster-1", "the cluster's labels"},
		},
		{
			name: "cluster no longer targeted",
			change: func(_ *refillFixture, src *protocol.GitRepoSource, _ []protocol.ClusterRecord) {
				src.Spec.Targets = []api.TargetSelector{{ClusterName: "cluster-2"}}
			},
			in:   func(f *refillFixture) activities.RefillInput { return f.optionsOf("app") },
			want: []string{"bundle repo-app", "no longer targets cluster cluster-1"},
		},
		{
			name: "bundle of a rollout's targeting rendered with another spec",
			in: func(f *refillFixture) activities.RefillInput {
				spec := f.spec
				spec.KeepResources = true
				b := f.rendered["app"]
				return activities.RefillInput{GitRepo: f.ref, Commit: f.commit, Spec: &spec, Bundle: b.Name, BundleKey: b.BundleKey}
			},
			want: []string{"bundle repo-app", "renders to bundle", "changed since it was rendered"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRefillFixture(t)
			if tt.change != nil {
				f.temporal.change(func(src *protocol.GitRepoSource, clusters []protocol.ClusterRecord) { tt.change(f, src, clusters) })
			}
			dir := t.TempDir()
			in := tt.in(f)
			err := activities.Refill(f.controller(t, dir, zaptest.NewLogger(t)))(context.Background(), in)
			require.ErrorIs(t, err, activities.ErrContentChanged)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.False(t, holds(t, dir, in), "nothing is stored under the ID asked for")
		})
	}
}

// TestRefill_ConcurrentMissesRenderOnce: a fresh replica misses the
// content of every cluster's deploy at once; the commit is rendered once,
// for all of them, and later misses of the same commit render nothing.
func TestRefill_ConcurrentMissesRenderOnce(t *testing.T) {
	f := newRefillFixture(t)
	core, logs := observer.New(zap.InfoLevel)
	dir := t.TempDir()
	refill := activities.Refill(f.controller(t, dir, zap.New(core)))
	var ins []activities.RefillInput
	for _, p := range []string{"app", "web"} {
		ins = append(ins, f.manifestOf(p), f.optionsOf(p))
	}
	start := make(chan struct{})
	errs := make(chan error, 20*len(ins))
	var wg sync.WaitGroup
	for range 20 {
		for _, in := range ins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- refill(context.Background(), in)
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 1, logs.FilterMessage(reRendered).Len())
	for _, in := range ins {
		assert.True(t, holds(t, dir, in))
	}

	// Options of a watched release (no bundle key, no commit) need the
	// render's bundles: they are remembered.
	in := f.optionsOf("web")
	in.BundleKey, in.Commit = "", ""
	require.NoError(t, refill(context.Background(), in))
	assert.Equal(t, 1, logs.FilterMessage(reRendered).Len())
}

// TestDeploy_RefillsContentOfAnotherController: a push-mode deploy on a
// controller whose state dir is empty deploys what another controller
// planned; once the GitRepo's spec changed, the deploy reports the
// bundle's content unavailable, naming why, and deploys nothing.
func TestDeploy_RefillsContentOfAnotherController(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	f := newRefillFixture(t)
	deployWith := func(t *testing.T, logger *zap.Logger) activities.DeployResult {
		t.Helper()
		dir := t.TempDir()
		ctrl := f.controller(t, dir, logger)
		acts := &activities.ClusterActivities{
			Clusters: cluster.NewConnections(cluster.ConnectionsOptions{
				Config: func(string) (*rest.Config, error) { return kube.RESTConfig(), nil },
			}),
			Deployer: deployer.New(deployer.Options{Logger: logger, Timeout: time.Minute}),
			Content:  ctrl.Content,
			Refill:   activities.Refill(ctrl),
			Logger:   logger,
		}
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(acts)
		val, err := env.ExecuteActivity(acts.Deploy, activities.DeployInput{Cluster: "cluster-1", GitRepo: f.ref,
			Commit: f.commit, WorkflowID: "rollout/fleet-default/repo/x-1",
			Bundles: []activities.Bundle{f.planned["app"], f.planned["web"]}})
		require.NoError(t, err)
		var res activities.DeployResult
		require.NoError(t, val.Get(&res))
		require.False(t, res.Retry, res.Message)
		require.Len(t, res.Deployments, 2)
		return res
	}

	t.Run("refilled", func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		res := deployWith(t, zap.New(core))
		for _, d := range res.Deployments {
			assert.Equal(t, status.Ready, d.State, d.Message)
		}
		assert.Equal(t, 2, logs.FilterMessage("Deployed bundle").Len())
		assert.Equal(t, 1, logs.FilterMessage(reRendered).Len())
	})

	t.Run("spec changed since planned", func(t *testing.T) {
		f.temporal.change(func(src *protocol.GitRepoSource, _ []protocol.ClusterRecord) { src.Spec.TargetNamespace = "elsewhere" })
		core, logs := observer.New(zap.InfoLevel)
		res := deployWith(t, zap.New(core))
		for _, d := range res.Deployments {
			assert.Equal(t, outcome.ContentUnavailable, d.Outcome)
			assert.Equal(t, status.WaitApplied, d.State)
			assert.Contains(t, d.Message, "bundle "+d.Bundle)
			assert.Contains(t, d.Message, "content unavailable")
			assert.Contains(t, d.Message, "changed since this rollout was planned")
		}
		assert.Zero(t, logs.FilterMessage("Deployed bundle").Len())
	})
}
