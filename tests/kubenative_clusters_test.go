package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/kubenative"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// kubeNative is a management cluster (a real kube-apiserver with Fleet's
// CRDs, which is also a downstream cluster) served by one controller
// replica started with --management-kubeconfig, and a second downstream
// cluster; deps reach the same servers for the checks that call the
// handlers' functions directly.
type kubeNative struct {
	*mgmtFleet
	down *testenv.Cluster
	deps *kubenative.Deps
}

func knGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crds.Group, Version: crds.Version, Resource: resource}
}

// get reads a Fleet resource of the management cluster; nil when absent.
func (kn *kubeNative) get(t *testing.T, resource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := kn.dyn.Resource(knGVR(resource)).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return obj
}

// eventually waits up to 30 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 200*time.Millisecond, what)
}

// events returns the messages of the events with reason on the object.
func (kn *kubeNative) events(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	list, err := kn.mgmt.Clientset(t).CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String()})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// clusterList is `flotilla cluster list -o json` by name.
func (kn *kubeNative) clusterList(t *testing.T) map[string]protocol.ClusterRecord {
	t.Helper()
	var recs []protocol.ClusterRecord
	require.NoError(t, json.Unmarshal([]byte(kn.cli(t, "cluster", "list", "-o", "json")), &recs))
	out := map[string]protocol.ClusterRecord{}
	for _, r := range recs {
		out[r.Name] = r
	}
	return out
}

func startKubeNative(t *testing.T) *kubeNative {
	f := startFleet(t, 2, 0)
	mgmt := f.clusters[0]
	require.NoError(t, crds.Install(t.Context(), mgmt.RESTConfig()))
	for _, ns := range []string{"fleet-default", "team-b", "flotilla-system"} {
		_, err := mgmt.Clientset(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	dyn, err := dynamic.NewForConfig(mgmt.RESTConfig())
	require.NoError(t, err)
	mf := &mgmtFleet{fleet: f, mgmt: mgmt, dyn: dyn, keys: filepath.Join(f.stateDir, "seal-keys"),
		k: crdKubectl{bin: filepath.Join(testenv.Binaries(t), "kubectl"), kubeconfig: mgmt.KubeconfigPath, cacheDir: t.TempDir()}}
	mf.startReplica(t, 0)
	return &kubeNative{mgmtFleet: mf, down: f.clusters[1],
		deps: &kubenative.Deps{Temporal: f.w.client(t), TaskQueue: protocol.DefaultTaskQueue, Kube: mgmt.Clientset(t), Dynamic: dyn,
			Logger: zaptest.NewLogger(t)}}
}

// TestKubeNativeClusters: Fleet's Cluster, ClusterGroup and
// ClusterRegistrationToken resources applied with kubectl to a management
// cluster register, group and admit clusters as the CLI does, and the
// approval annotation approves once per setting.
func TestKubeNativeClusters(t *testing.T) {
	kn := startKubeNative(t)

	t.Run("KubeConfigSecretRegistersPushCluster", func(t *testing.T) { testKubeConfigSecret(t, kn) })

	t.Run("ExecKubeconfigRefused", func(t *testing.T) {
		crafted := craftedKubeconfig(t, kn.down, t.TempDir(), filepath.Join(t.TempDir(), "canary"), "127.0.0.1:9")
		data, err := os.ReadFile(crafted)
		require.NoError(t, err)
		kn.k.run(t, kubeconfigSecretDoc("crafted-kubeconfig", "fleet-default", string(data)), "apply", "-f", "-")
		kn.k.run(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {name: crafted, namespace: fleet-default}
spec: {kubeConfigSecret: crafted-kubeconfig}
`, "apply", "-f", "-")
		eventually(t, "a Warning event names the field", func() bool {
			return len(kn.events(t, "fleet-default", "crafted", kubenative.ReasonInvalidKubeconfig)) > 0
		})
		evs := kn.events(t, "fleet-default", "crafted", kubenative.ReasonInvalidKubeconfig)
		require.Len(t, evs, 1, "one Warning event")
		assert.Contains(t, evs[0], "spec.kubeConfigSecret: Secret fleet-default/crafted-kubeconfig key value")
		assert.Contains(t, evs[0], "users[admin].user.exec: Forbidden")
		assert.NotContains(t, evs[0], "canary")
		_, listed := kn.clusterList(t)["crafted"]
		assert.False(t, listed, "nothing was registered")
	})

	t.Run("NameHeldByAnotherNamespace", func(t *testing.T) {
		kn.k.run(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {name: prod-1, namespace: team-b, labels: {env: stolen}}
`, "apply", "-f", "-")
		eventually(t, "refused with an event", func() bool { return len(kn.events(t, "team-b", "prod-1", kubenative.ReasonNameTaken)) > 0 })
		assert.Contains(t, kn.events(t, "team-b", "prod-1", kubenative.ReasonNameTaken)[0], "Cluster fleet-default/prod-1 holds the name")
		assert.Equal(t, map[string]string{"env": "kn"}, kn.clusterList(t)["prod-1"].Labels, "the holder's cluster is untouched")
		clusters := schema.GroupVersionResource{Group: crds.Group, Version: crds.Version, Resource: "clusters"}
		eventually(t, "Accepted and Ready False on the refused Cluster", func() bool {
			obj, err := kn.dyn.Resource(clusters).Namespace("team-b").Get(t.Context(), "prod-1", metav1.GetOptions{})
			return err == nil && condition(obj, "Accepted")["status"] == "False" && condition(obj, "Ready")["reason"] == kubenative.ReasonNameTaken
		})
		kn.k.run(t, "", "delete", "-n", "team-b", "clusters.fleet.cattle.io/prod-1")
		_, listed := kn.clusterList(t)["prod-1"]
		assert.True(t, listed, "deleting the refused Cluster leaves the holder's cluster")
	})

	t.Run("ClusterGroup", func(t *testing.T) {
		kn.k.run(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata: {name: kn-group, namespace: fleet-default}
spec: {selector: {matchLabels: {env: kn}}}
`, "apply", "-f", "-")
		repo := kn.git.CreateRepo(t, "kn-grouped", map[string]string{"fleet.yaml": fleetYAML("kn-grouped"), "cm.yaml": configMapDoc("kn-grouped", "v1")})
		kn.k.run(t, fleetGitRepoDoc("kn-grouped", repo.URL(), "  targets:\n  - clusterGroup: kn-group\n"), "apply", "-f", "-")
		kn.waitFor(t, "kn-grouped", "deployed through the group", settledAt(repo.Head(t), 1))
		var rec protocol.GroupRecord
		queryInto(t, kn, protocol.ClusterGroupID("kn-group"), &rec)
		assert.Equal(t, map[string]string{"env": "kn"}, rec.Selector.MatchLabels)

		kn.k.run(t, "", "delete", "-n", "fleet-default", "gitrepos.fleet.cattle.io/kn-grouped", "clustergroups.fleet.cattle.io/kn-group")
		assert.True(t, workflowEnded(t, kn, protocol.ClusterGroupID("kn-group")), "the group's workflow ended before its finalizer let go")
	})

	t.Run("RegistrationToken", func(t *testing.T) { testRegistrationToken(t, kn) })

	t.Run("ApprovalAnnotation", func(t *testing.T) { testApprovalAnnotation(t, kn) })

	t.Run("ClusterDeleted", func(t *testing.T) {
		kn.k.run(t, "", "delete", "-n", "fleet-default", "clusters.fleet.cattle.io/prod-1")
		_, listed := kn.clusterList(t)["prod-1"]
		assert.False(t, listed, "deleting the Cluster removed the cluster, as flotilla cluster remove")
	})
}

// testKubeConfigSecret: a Cluster with kubeConfigSecret is registered in
// push mode with the Secret's kubeconfig and its labels, a GitRepo
// targeting the labels deploys there, and a changed Secret registers the
// new kubeconfig.
func testKubeConfigSecret(t *testing.T, kn *kubeNative) {
	kn.k.run(t, kubeconfigSecretDoc("prod-1-kubeconfig", "fleet-default", string(kn.down.Kubeconfig)), "apply", "-f", "-")
	kn.k.run(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {name: prod-1, namespace: fleet-default, labels: {env: kn}}
spec: {kubeConfigSecret: prod-1-kubeconfig}
`, "apply", "-f", "-")
	_, wantHash, err := cluster.PrepareKubeconfig("prod-1", kn.down.Kubeconfig, "")
	require.NoError(t, err)
	eventually(t, "flotilla cluster list shows the Cluster with the Secret's kubeconfig", func() bool {
		return kn.clusterList(t)["prod-1"].KubeconfigHash == wantHash
	})
	rec := kn.clusterList(t)["prod-1"]
	assert.Equal(t, map[string]string{"env": "kn"}, rec.Labels)
	assert.False(t, rec.PullMode(), "push mode: the controller holds its kubeconfig")
	assert.Contains(t, kn.get(t, "clusters", "fleet-default", "prod-1").GetFinalizers(), kubenative.FinalizerCluster)

	repo := kn.git.CreateRepo(t, "kn-app", map[string]string{"fleet.yaml": fleetYAML("kn-ns"), "cm.yaml": configMapDoc("kn-app", "v1")})
	kn.k.run(t, fleetGitRepoDoc("kn-app", repo.URL(), selectorTarget("env", "kn")), "apply", "-f", "-")
	kn.waitFor(t, "kn-app", "deployed to the Cluster from the management cluster", settledAt(repo.Head(t), 1))
	assert.Equal(t, "v1", configMapValue(t, kn.down, "kn-ns", "kn-app"))
	kn.k.run(t, "", "delete", "-n", "fleet-default", "gitrepos.fleet.cattle.io/kn-app")

	changed := withContextNamespace(t, kn.down.Kubeconfig, "kn-ns")
	_, newHash, err := cluster.PrepareKubeconfig("prod-1", changed, "")
	require.NoError(t, err)
	require.NotEqual(t, wantHash, newHash)
	kn.k.run(t, kubeconfigSecretDoc("prod-1-kubeconfig", "fleet-default", string(changed)), "apply", "-f", "-")
	eventually(t, "a changed Secret registers the new kubeconfig", func() bool {
		return kn.clusterList(t)["prod-1"].KubeconfigHash == newHash
	})
}

// testRegistrationToken: a ClusterRegistrationToken yields a registration
// token in a Secret of Fleet's type (values for the flotilla-agent
// chart), its name and expiry in the status; Temporal never holds the
// token; deleting the resource revokes it.
func testRegistrationToken(t *testing.T, kn *kubeNative) {
	kn.k.run(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterRegistrationToken
metadata: {name: new-clusters, namespace: fleet-default}
spec: {ttl: 1h}
`, "apply", "-f", "-")
	var crt *unstructured.Unstructured
	eventually(t, "status.secretName is set", func() bool {
		crt = kn.get(t, "clusterregistrationtokens", "fleet-default", "new-clusters")
		name, _, _ := unstructured.NestedString(crt.Object, "status", "secretName")
		return name == "new-clusters"
	})
	expires, _, _ := unstructured.NestedString(crt.Object, "status", "expires")
	assert.Equal(t, crt.GetCreationTimestamp().Add(time.Hour).UTC().Format(time.RFC3339), expires)

	sec, err := kn.mgmt.Clientset(t).CoreV1().Secrets("fleet-default").Get(t.Context(), "new-clusters", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.SecretType(kubenative.TokenSecretType), sec.Type)
	require.Len(t, sec.OwnerReferences, 1)
	assert.Equal(t, crt.GetUID(), sec.OwnerReferences[0].UID, "garbage-collected with the token")
	var values struct {
		Registration struct{ Token string }   `json:"registration"`
		Temporal     struct{ Address string } `json:"temporal"`
	}
	require.NoError(t, yaml.Unmarshal(sec.Data[kubenative.TokenValuesKey], &values))
	assert.Equal(t, kn.w.frontend, values.Temporal.Address, "agents are told where to register: the controller's Temporal")
	id, _, err := cluster.ParseToken(values.Registration.Token)
	require.NoError(t, err)
	assert.Equal(t, id, crt.GetAnnotations()[kubenative.AnnotationTokenStarted], "started once: never again after Temporal forgets it")
	list := kn.cli(t, "cluster", "token", "list")
	assert.Contains(t, list, id, "listed as the CLI's tokens are")
	assert.Equal(t, 2, strings.Count(list, "\n"), "one token (and the header): %s", list)
	secret := values.Registration.Token[strings.LastIndex(values.Registration.Token, ".")+1:]
	assertHistoryLacks(t, kn, protocol.ClusterTokenID(id), secret)

	kn.k.run(t, "", "delete", "-n", "fleet-default", "clusterregistrationtokens.fleet.cattle.io/new-clusters")
	var st protocol.TokenStatus
	queryInto(t, kn, protocol.ClusterTokenID(id), &st)
	assert.True(t, st.Revoked, "deleting the ClusterRegistrationToken revoked its token before its finalizer let go")
	assert.NotContains(t, kn.cli(t, "cluster", "token", "list"), id)
}

// fleetGitRepoDoc is gitRepoDoc as Fleet's GitRepo in fleet-default.
func fleetGitRepoDoc(name, repoURL, spec string) string {
	doc := strings.Replace(gitRepoDoc(name, repoURL, spec), "flotilla.dev/v1alpha1", "fleet.cattle.io/v1alpha1", 1)
	return strings.Replace(doc, "  name: "+name+"\n", "  name: "+name+"\n  namespace: fleet-default\n", 1)
}

// testApprovalAnnotation: flotilla.dev/approve on a GitRepo approves what
// waits and is removed, with an event naming who set it; the same setting
// replayed (a controller that crashed before removing it) approves
// nothing more; a new setting approves the next partition.
func testApprovalAnnotation(t *testing.T, kn *kubeNative) {
	mgmt := kn.mgmt.Name
	kn.cli(t, "cluster", "add", mgmt, "--kubeconfig", kn.mgmt.KubeconfigPath)
	fy := fleetYAML("gated-ns") + `rolloutStrategy:
  partitions:
  - name: first
    clusterName: prod-1
    requireApproval: true
  - name: second
    clusterName: ` + mgmt + `
    requireApproval: true
`
	repo := kn.git.CreateRepo(t, "gated", map[string]string{"fleet.yaml": fy, "cm.yaml": configMapDoc("gated", "v1")})
	kn.k.run(t, fleetGitRepoDoc("gated", repo.URL(), "  targets:\n  - clusterName: prod-1\n  - clusterName: "+mgmt+"\n"), "apply", "-f", "-")
	waiting := func(partition string) func(status.GitRepo) bool {
		return func(st status.GitRepo) bool {
			c, ok := st.Condition("WaitingForApproval")
			return ok && c.Status == "True" && strings.Contains(c.Message, partition)
		}
	}
	kn.waitFor(t, "gated", "partition first waits", waiting("first"))

	annotated := kn.annotate(t, "gated", kubenative.AnnotationApprove+"=*")
	eventually(t, "the annotation is removed once applied", func() bool {
		_, has := kn.get(t, "gitrepos", "fleet-default", "gated").GetAnnotations()[kubenative.AnnotationApprove]
		return !has
	})
	kn.waitFor(t, "gated", "partition second waits", waiting("second"))
	evs := kn.events(t, "fleet-default", "gated", kubenative.ReasonApproved)
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0], `flotilla.dev/approve="*" (set by kubectl-annotate): rollout rollout/fleet-default/gated/`)
	assert.Contains(t, evs[0], ": approved gated/first")

	// The same setting once more approves nothing: second still waits.
	require.NoError(t, kubenative.Approve(t.Context(), kn.deps, annotated))
	assert.True(t, waiting("second")(kn.status(t, "gated")), "a replayed annotation approved nothing")
	assert.Empty(t, configMapValue(t, kn.mgmt, "gated-ns", "gated"), "partition second did not deploy")

	bundle := kn.status(t, "gated").Waits[0].Bundle
	kn.annotate(t, "gated", kubenative.AnnotationApprove+"="+bundle+"/second")
	kn.waitFor(t, "gated", "both partitions deployed", settledAt(repo.Head(t), 2))
	kn.annotate(t, "gated", kubenative.AnnotationApprove+"=a/b/c")
	eventually(t, "an invalid value is dropped with a warning", func() bool {
		return len(kn.events(t, "fleet-default", "gated", kubenative.ReasonInvalidApproval)) > 0
	})
	kn.k.run(t, "", "delete", "-n", "fleet-default", "gitrepos.fleet.cattle.io/gated")
	kn.cli(t, "cluster", "remove", mgmt)
}

// annotate sets an annotation on GitRepo fleet-default/name with kubectl
// and returns the object as the controller first saw it annotated (with
// its managedFields), read from a watch.
func (kn *kubeNative) annotate(t *testing.T, name, kv string) *unstructured.Unstructured {
	t.Helper()
	key, value, _ := strings.Cut(kv, "=")
	w, err := kn.dyn.Resource(knGVR("gitrepos")).Namespace("fleet-default").Watch(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: kn.get(t, "gitrepos", "fleet-default", name).GetResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()
	kn.k.run(t, "", "annotate", "--overwrite", "-n", "fleet-default", "gitrepos.fleet.cattle.io/"+name, kv)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if obj, ok := ev.Object.(*unstructured.Unstructured); ok && obj.GetAnnotations()[key] == value {
				return obj
			}
		case <-timeout:
			t.Fatalf("GitRepo %s: annotation %s not seen", name, kv)
		}
	}
}

// kubeconfigSecretDoc is a v1 Secret holding value under Fleet's kubeconfig key.
func kubeconfigSecretDoc(name, ns, value string) string {
	b, _ := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns}, "stringData": map[string]string{kubenative.KubeconfigSecretKey: value}})
	return string(b)
}

// withContextNamespace returns kubeconfig with its contexts' namespace set.
func withContextNamespace(t *testing.T, kubeconfig []byte, ns string) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Contexts {
		c.Namespace = ns
	}
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return out
}

// queryInto queries a workflow's status.
func queryInto(t *testing.T, kn *kubeNative, id string, out any) {
	t.Helper()
	v, err := kn.deps.Temporal.QueryWorkflow(t.Context(), id, "", protocol.QueryStatus)
	require.NoError(t, err)
	require.NoError(t, v.Get(out))
}

func workflowEnded(t *testing.T, kn *kubeNative, id string) bool {
	t.Helper()
	d, err := kn.deps.Temporal.DescribeWorkflowExecution(t.Context(), id, "")
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// assertHistoryLacks checks that no event of the workflow's history
// holds s in any field (payloads included, as their raw bytes).
func assertHistoryLacks(t *testing.T, kn *kubeNative, id, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	it := kn.deps.Temporal.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		raw, err := proto.Marshal(ev)
		require.NoError(t, err)
		assert.False(t, bytes.Contains(raw, []byte(s)), "history event %d holds it", ev.GetEventId())
		n++
	}
	require.Positive(t, n)
}
