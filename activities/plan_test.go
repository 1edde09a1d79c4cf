package activities_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// The Secret's values before and after the change: neither may appear in
// a plan, nor may their base64.
const (
	secretBefore = "hunter2-before-Xq"
	secretAfter  = "hunter2-after-Zw"
)

// planFixture is a GitRepo's bundles at two commits: "app" changes a
// ConfigMap's value and drops one of its keys, adds one ConfigMap, drops another, changes a
// Deployment's (immutable) selector and a Secret's value; "same" does not
// change; "gone" is dropped by the second commit.
type planFixture struct {
	store              *content.Store
	appV1, appV2, same activities.Bundle
	gone               activities.Bundle
	repo               activities.GitRepoRef
	commitV1, commitV2 string
	goneRelease        activities.Release
	planInput          activities.PlanInput
	// current is what the first commit deployed.
	current []activities.Bundle
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	store, err := content.New(t.TempDir())
	require.NoError(t, err)
	f := &planFixture{store: store, repo: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"},
		commitV1: strings.Repeat("1", 40), commitV2: strings.Repeat("2", 40)}
	f.appV1 = putBundle(t, store, "app", "plan-app", map[string]string{
		"cm.yaml":     configMap("app", "value: one\n  extra: dropped"),
		"old.yaml":    configMap("old", "value: old"),
		"deploy.yaml": deployment("web"),
		"secret.yaml": secret(secretBefore),
	})
	f.appV2 = putBundle(t, store, "app", "plan-app", map[string]string{
		"cm.yaml":     configMap("app", "value: two"),
		"new.yaml":    configMap("new", "value: new"),
		"deploy.yaml": deployment("web2"),
		"secret.yaml": secret(secretAfter),
	})
	f.same = putBundle(t, store, "same", "plan-same", map[string]string{"cm.yaml": configMap("same", "value: same")})
	f.gone = putBundle(t, store, "gone", "plan-gone", map[string]string{"cm.yaml": configMap("gone", "value: gone")})
	f.goneRelease = activities.Release{Bundle: "gone", Release: f.gone.Release, Namespace: f.gone.Namespace}
	f.planInput = activities.PlanInput{Cluster: "cluster-1", GitRepo: f.repo, Commit: f.commitV2, WorkflowID: "plan/fleet-default/repo/1",
		Bundles: []activities.Bundle{f.appV2, f.same}, Remove: []activities.Release{f.goneRelease}}
	f.current = []activities.Bundle{f.appV1, f.same, f.gone}
	return f
}

// putBundle stores a raw-YAML bundle released as release in namespace
// release-ns.
func putBundle(t *testing.T, store *content.Store, name, release string, files map[string]string) activities.Bundle {
	t.Helper()
	return putBundleWith(t, store, name, release, bundle.Options{}, files)
}

// putBundleWith is putBundle with options.
func putBundleWith(t *testing.T, store *content.Store, name, release string, opts bundle.Options, files map[string]string) activities.Bundle {
	t.Helper()
	var m bundle.Manifest
	for file, text := range files {
		m.Resources = append(m.Resources, bundle.Resource{Name: file, Content: text})
	}
	manifestID, err := store.PutManifest(m)
	require.NoError(t, err)
	optionsHash, err := store.PutOptions(opts)
	require.NoError(t, err)
	return activities.Bundle{Name: name, Path: name, ManifestID: manifestID, OptionsHash: optionsHash,
		DeploymentID: fleetyaml.DeploymentID(manifestID, opts), Release: release, Namespace: release + "-ns"}
}

func configMap(name, data string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  " + data + "\n  size: big\n"
}

func deployment(app string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: ` + app + `}
  template:
    metadata:
      labels: {app: ` + app + `}
    spec:
      containers: [{name: web, image: "registry.example/web:1"}]
`
}

func secret(value string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: " + value + "\n  user: admin\n"
}

// assertNoSecret fails when the plan's JSON shows a Secret value.
func assertNoSecret(t *testing.T, c plan.Cluster) {
	t.Helper()
	js, err := json.Marshal(c)
	require.NoError(t, err)
	for _, v := range []string{secretBefore, secretAfter} {
		assert.NotContains(t, string(js), v)
		assert.NotContains(t, string(js), base64.StdEncoding.EncodeToString([]byte(v)))
		assert.NotContains(t, string(js), strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(v)), "="))
	}
}

// objectsOf indexes a release's objects by "Kind/name".
func objectsOf(r plan.Release) map[string]plan.Object {
	out := map[string]plan.Object{}
	for _, o := range r.Objects {
		out[o.Kind+"/"+o.Name] = o
	}
	return out
}

// TestPlan: against a real API server, a release deployed at one commit
// planned at the next shows the changed ConfigMap value as an exact diff
// line, the new object created and the dropped one deleted, the
// Deployment's changed selector as the API server's "field is immutable"
// refusal, the Secret changed with its values redacted, an unchanged
// release without objects and a dropped release uninstalled; nothing is
// applied. A cluster that does not answer fails the activity as
// ClusterUnreachable, one that refuses the credentials as
// ClusterUnauthorized.
func TestPlan(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	f := newPlanFixture(t)
	logger := zaptest.NewLogger(t)
	acts := &activities.ClusterActivities{
		Clusters: cluster.NewConnections(cluster.ConnectionsOptions{
			Config: func(name string) (*rest.Config, error) {
				switch name {
				case "down":
					return &rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second}, nil
				case "refusing":
					cfg := rest.AnonymousClientConfig(kube.RESTConfig())
					cfg.BearerToken = "not-a-token"
					return cfg, nil
				}
				return kube.RESTConfig(), nil
			},
		}),
		Deployer: deployer.New(deployer.Options{Logger: logger, Timeout: time.Minute}),
		Content:  f.store,
		Logger:   logger,
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	_, err := env.ExecuteActivity(acts.Deploy, activities.DeployInput{Cluster: "cluster-1", GitRepo: f.repo, Commit: f.commitV1,
		Bundles: []activities.Bundle{f.appV1, f.same, f.gone}})
	require.NoError(t, err)

	start := time.Now()
	val, err := env.ExecuteActivity(acts.Plan, f.planInput)
	require.NoError(t, err)
	t.Logf("plan of 3 releases took %v", time.Since(start))
	var got plan.Cluster
	require.NoError(t, val.Get(&got))
	require.Len(t, got.Releases, 3)
	assert.False(t, got.Offline)
	assertNoSecret(t, got)

	app, gone, same := got.Releases[0], got.Releases[1], got.Releases[2]
	assert.Equal(t, plan.Upgrade, app.Action)
	assert.Equal(t, f.appV1.DeploymentID, app.From)
	assert.Equal(t, f.appV2.DeploymentID, app.To)
	objs := objectsOf(app)
	assert.Len(t, objs, 5, "unchanged objects are left out")
	cm := objs["ConfigMap/app"]
	assert.Equal(t, plan.Update, cm.Change)
	assert.Contains(t, cm.Diff, "\n-  value: one\n+  value: two\n")
	assert.Contains(t, cm.Diff, "\n-  extra: dropped\n", "a key the new manifest drops is removed, as Helm's three-way merge does")
	assert.NotContains(t, cm.Diff, "flotilla.dev/commit", "the commit annotation changes on every rollout")
	assert.NotContains(t, cm.Diff, "managedFields")
	assert.Equal(t, "plan-app-ns", cm.Namespace)
	assert.Equal(t, plan.Create, objs["ConfigMap/new"].Change)
	assert.Contains(t, objs["ConfigMap/new"].Diff, "+  value: new\n")
	assert.Equal(t, plan.Delete, objs["ConfigMap/old"].Change)
	assert.Contains(t, objs["ConfigMap/old"].Diff, "-  value: old\n")
	web := objs["Deployment/web"]
	assert.Contains(t, web.Error, "field is immutable")
	assert.Contains(t, web.Diff, "+      app: web2\n", "the refused change is still shown")
	creds := objs["Secret/creds"]
	assert.Equal(t, plan.Update, creds.Change)
	assert.Contains(t, creds.Diff, "-  password: <redacted>\n+  password: <redacted, changed>\n")
	assert.Contains(t, creds.Diff, "   user: <redacted>\n")
	assert.Contains(t, app.Error, "Deployment web")

	assert.Equal(t, plan.Uninstall, gone.Action)
	assert.Equal(t, f.gone.DeploymentID, gone.From)
	if assert.Len(t, gone.Objects, 1) {
		assert.Equal(t, plan.Delete, gone.Objects[0].Change)
		assert.Equal(t, "gone", gone.Objects[0].Name)
	}

	assert.Equal(t, plan.Unchanged, same.Action)
	assert.Empty(t, same.Objects)
	assert.Empty(t, same.Error)

	t.Run("nothing applied", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(kube.RESTConfig())
		require.NoError(t, err)
		live, err := cs.CoreV1().ConfigMaps("plan-app-ns").Get(context.Background(), "app", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "one", live.Data["value"])
		_, err = cs.CoreV1().ConfigMaps("plan-app-ns").Get(context.Background(), "new", metav1.GetOptions{})
		assert.Error(t, err)
		getter, err := deployer.NewRESTClientGetter(kube.RESTConfig(), "plan-app-ns")
		require.NoError(t, err)
		id, _, err := acts.Deployer.Current(getter, "plan-app-ns", "plan-app")
		require.NoError(t, err)
		assert.Equal(t, f.appV1.DeploymentID, id)
	})

	t.Run("as the bundle's service account", func(t *testing.T) {
		// viewer exists but may do nothing: the deploy could not read the
		// release, so neither may the plan.
		cs, err := kubernetes.NewForConfig(kube.RESTConfig())
		require.NoError(t, err)
		ctx := context.Background()
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plan-sa-ns"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().ServiceAccounts("plan-sa-ns").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		sa := putBundleWith(t, f.store, "sa", "plan-sa", bundle.Options{ServiceAccount: "viewer"}, map[string]string{"cm.yaml": configMap("sa", "value: sa")})
		in := f.planInput
		in.Bundles, in.Remove = []activities.Bundle{sa}, nil
		val, err := env.ExecuteActivity(acts.Plan, in)
		require.NoError(t, err)
		var got plan.Cluster
		require.NoError(t, val.Get(&got))
		require.Len(t, got.Releases, 1)
		assert.Contains(t, got.Releases[0].Error, "service account plan-sa-ns/viewer")
		assert.Contains(t, got.Releases[0].Error, "forbidden")
	})

	t.Run("ten bundles", func(t *testing.T) {
		var v1, v2 []activities.Bundle
		for i := range 10 {
			name := fmt.Sprintf("many-%d", i)
			v1 = append(v1, putBundle(t, f.store, name, "plan-"+name, map[string]string{
				"cm.yaml": configMap("cm", "value: one"), "deploy.yaml": deployment("web")}))
			v2 = append(v2, putBundle(t, f.store, name, "plan-"+name, map[string]string{
				"cm.yaml": configMap("cm", "value: two"), "deploy.yaml": deployment("web")}))
		}
		_, err := env.ExecuteActivity(acts.Deploy, activities.DeployInput{Cluster: "cluster-1", GitRepo: f.repo, Commit: f.commitV1, Bundles: v1})
		require.NoError(t, err)
		in := f.planInput
		in.Bundles, in.Remove = v2, nil
		start := time.Now()
		val, err := env.ExecuteActivity(acts.Plan, in)
		took := time.Since(start)
		require.NoError(t, err)
		var got plan.Cluster
		require.NoError(t, val.Get(&got))
		t.Logf("plan of 10 bundles (2 objects each) took %v", took)
		require.Len(t, got.Releases, 10)
		for _, r := range got.Releases {
			assert.Equal(t, plan.Upgrade, r.Action, r.Error)
			assert.Len(t, r.Objects, 1, "only the ConfigMap changes")
		}
		assert.Less(t, took, 5*time.Second, "generous for a shared CI machine; measured well under 500ms alone")
	})

	for cluster, typ := range map[string]string{"down": activities.ErrTypeClusterUnreachable, "refusing": activities.ErrTypeClusterUnauthorized} {
		t.Run(cluster, func(t *testing.T) {
			in := f.planInput
			in.Cluster = cluster
			_, err := env.ExecuteActivity(acts.Plan, in)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			assert.Equal(t, typ, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.NotContains(t, err.Error(), "not-a-token")
		})
	}
}

// TestPlanOffline: without a cluster, the change is the render of the new
// commit against the render of what the GitRepo last deployed there:
// the same value diff, created and deleted objects and redacted Secret
// as online (the Deployment's selector change shows as a diff: no API
// server refuses it), the unchanged release without objects, the dropped
// release's objects deleted, a release not deployed before installed;
// Offline and Reason set.
func TestPlanOffline(t *testing.T) {
	f := newPlanFixture(t)
	acts := &activities.Activities{Content: f.store, Logger: zaptest.NewLogger(t)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	fresh := putBundle(t, f.store, "fresh", "plan-fresh", map[string]string{"cm.yaml": configMap("fresh", "value: fresh")})
	in := activities.PlanOfflineInput{PlanInput: f.planInput, Current: f.current, Reason: "cluster-1 is offline since 10:00"}
	in.Bundles = append(in.Bundles, fresh)
	val, err := env.ExecuteActivity(acts.PlanOffline, in)
	require.NoError(t, err)
	var got plan.Cluster
	require.NoError(t, val.Get(&got))
	assert.True(t, got.Offline)
	assert.Equal(t, in.Reason, got.Reason)
	assertNoSecret(t, got)
	require.Len(t, got.Releases, 4)

	app, fr, gone, same := got.Releases[0], got.Releases[1], got.Releases[2], got.Releases[3]
	assert.Equal(t, plan.Upgrade, app.Action)
	assert.Empty(t, app.Error)
	objs := objectsOf(app)
	assert.Len(t, objs, 5)
	assert.Contains(t, objs["ConfigMap/app"].Diff, "\n-  value: one\n+  value: two\n")
	assert.Contains(t, objs["ConfigMap/app"].Diff, "\n-  extra: dropped\n")
	assert.NotContains(t, objs["ConfigMap/app"].Diff, "flotilla.dev/commit")
	assert.Equal(t, plan.Create, objs["ConfigMap/new"].Change)
	assert.Equal(t, plan.Delete, objs["ConfigMap/old"].Change)
	assert.Contains(t, objs["Deployment/web"].Diff, "-      app: web\n+      app: web2\n")
	assert.Contains(t, objs["Secret/creds"].Diff, "-  password: <redacted>\n+  password: <redacted, changed>\n")

	assert.Equal(t, plan.Install, fr.Action)
	assert.Empty(t, fr.From)
	if assert.Len(t, fr.Objects, 1) {
		assert.Equal(t, plan.Create, fr.Objects[0].Change)
	}

	assert.Equal(t, plan.Uninstall, gone.Action)
	if assert.Len(t, gone.Objects, 1) {
		assert.Equal(t, plan.Delete, gone.Objects[0].Change)
	}

	assert.Equal(t, plan.Unchanged, same.Action)
	assert.Empty(t, same.Objects)
}
