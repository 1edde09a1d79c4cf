package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

var crdTestGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdKubectl runs the testbin's kubectl against one cluster.
type crdKubectl struct {
	bin, kubeconfig, cacheDir string
}

// run runs kubectl with args and stdin, and returns stdout; it fails the
// test on a non-zero exit.
func (k crdKubectl) run(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, stderr, err := k.try(stdin, args...)
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), stderr)
	return out
}

func (k crdKubectl) try(stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestCRDs: the chart's CRDs install with `kubectl apply -f` and with
// crds.Install (idempotent; a Fleet CRD already there is left as it is),
// accept Fleet's example GitRepos and unknown fields unchanged, and show
// Fleet's printer columns with the values of a Fleet-shaped status.
func TestCRDs(t *testing.T) {
	cluster := testenv.StartClusters(t, 1, testenv.Options{})[0]
	k := crdKubectl{
		bin:        filepath.Join(testenv.Binaries(t), "kubectl"),
		kubeconfig: cluster.KubeconfigPath,
		cacheDir:   t.TempDir(),
	}
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	require.NoError(t, err)
	crdClient := dyn.Resource(crdTestGVR)
	cs := cluster.Clientset(t)
	for _, ns := range []string{"fleet-default", "fleet-local"} {
		_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	t.Run("KubectlApplyChartDir", func(t *testing.T) {
		out := k.run(t, "", "apply", "-f", filepath.Join("..", filepath.FromSlash(crds.ChartDir)))
		for _, kind := range crds.Kinds {
			assert.Contains(t, out, "customresourcedefinition.apiextensions.k8s.io/"+kind.CRDName()+" created")
		}
		k.run(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", crds.ManagedByLabel+"="+crds.ManagedByValue)
	})

	t.Run("InstallLeavesFleetsCRD", func(t *testing.T) {
		testInstallLeavesFleetsCRD(t, cluster, crdClient)
	})

	t.Run("FleetExamplesApplyUnchanged", func(t *testing.T) {
		docs := fleetExampleGitRepos(t)
		require.NotEmpty(t, docs)
		for _, doc := range docs {
			crdApplyAndCompare(t, k, doc)
		}
		t.Logf("%d GitRepo documents of fleet-examples applied and read back unchanged", len(docs))
	})

	t.Run("UnknownFieldsPreserved", func(t *testing.T) {
		crdApplyAndCompare(t, k, crdUnknownGitRepo)
		crdApplyAndCompare(t, k, crdUnknownHelmOp)
		crdApplyAndCompare(t, k, crdUnknownPolicy)
	})

	t.Run("PrinterColumns", func(t *testing.T) {
		for _, c := range crdColumnCases {
			t.Run(c.resource, func(t *testing.T) { testPrinterColumns(t, k, c) })
		}
		// Fleet's category: `kubectl get fleet` lists GitRepos, HelmOps
		// and ClusterGroups.
		out := k.run(t, "", "get", "fleet", "-A", "-o", "name")
		for _, want := range []string{"gitrepo.fleet.cattle.io/unknown-fields", "helmop.fleet.cattle.io/unknown-fields", "clustergroup.fleet.cattle.io/prod"} {
			assert.Contains(t, out, want)
		}
	})
}

// testInstallLeavesFleetsCRD replaces the policies CRD with one of another
// schema and without Flotilla's label, as Fleet's chart would have
// installed it, runs crds.Install twice and checks Fleet's CRD is as it
// was and Flotilla's are applied (taken over from kubectl) and unchanged
// by the second run; after Fleet's CRD is gone, Install installs its own.
func testInstallLeavesFleetsCRD(t *testing.T, cluster *testenv.Cluster, client dynamic.ResourceInterface) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const name = "policies.fleet.cattle.io"
	crdDeleteAndWait(ctx, t, client, name)
	var fleetCRD unstructured.Unstructured
	require.NoError(t, yaml.Unmarshal([]byte(crdFleetsPolicy), &fleetCRD.Object))
	_, err := client.Create(ctx, &fleetCRD, metav1.CreateOptions{})
	require.NoError(t, err)
	before, err := client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)

	require.NoError(t, crds.Install(ctx, cluster.RESTConfig()))
	generations := map[string]int64{}
	for _, kind := range crds.Kinds {
		got, err := client.Get(ctx, kind.CRDName(), metav1.GetOptions{})
		require.NoError(t, err)
		generations[kind.CRDName()] = got.GetGeneration()
		if kind.CRDName() == name {
			continue
		}
		assert.True(t, crds.Managed(got.GetLabels()), kind.CRDName())
		assert.True(t, crdHasManager(got, crds.FieldManager), "%s: Install server-side applied it", kind.CRDName())
	}
	require.NoError(t, crds.Install(ctx, cluster.RESTConfig()), "Install is idempotent")
	for _, kind := range crds.Kinds {
		got, err := client.Get(ctx, kind.CRDName(), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, generations[kind.CRDName()], got.GetGeneration(), "%s: the second Install changed its spec", kind.CRDName())
	}
	after, err := client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.GetLabels(), after.GetLabels(), "Fleet's CRD keeps its labels")
	assert.Equal(t, before.Object["spec"], after.Object["spec"], "Fleet's CRD keeps its schema")
	assert.False(t, crdHasManager(after, crds.FieldManager), "Install never wrote Fleet's CRD")

	crdDeleteAndWait(ctx, t, client, name)
	require.NoError(t, crds.Install(ctx, cluster.RESTConfig()))
	got, err := client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, crds.Managed(got.GetLabels()), "with Fleet's CRD gone, Install installs Flotilla's")
}

// crdFleetsPolicy stands for Fleet's Policy CRD: another schema, Helm's
// managed-by label.
const crdFleetsPolicy = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: policies.fleet.cattle.io
  labels: {app.kubernetes.io/managed-by: Helm}
spec:
  group: fleet.cattle.io
  scope: Namespaced
  names: {kind: Policy, listKind: PolicyList, plural: policies, singular: policy}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          onlyFleetHasThis: {type: string}
`

func crdHasManager(obj *unstructured.Unstructured, manager string) bool {
	for _, m := range obj.GetManagedFields() {
		if m.Manager == manager {
			return true
		}
	}
	return false
}

// crdDeleteAndWait deletes the CRD name and waits until it is gone.
func crdDeleteAndWait(ctx context.Context, t *testing.T, client dynamic.ResourceInterface, name string) {
	t.Helper()
	require.NoError(t, client.Delete(ctx, name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "CRD %s not deleted", name)
}

// fleetExampleGitRepos returns every GitRepo document of fleet-examples:
// the yaml blocks of its README.md files and the files of gitrepos/
// directories, as written.
func fleetExampleGitRepos(t *testing.T) []string {
	root := testenv.SharedDir(t, "fleet-examples")
	block := regexp.MustCompile("(?s)```ya?ml\n(.*?)```")
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var texts []string
		switch {
		case d.Name() == "README.md":
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range block.FindAllStringSubmatch(string(data), -1) {
				texts = append(texts, m[1])
			}
		case filepath.Base(filepath.Dir(path)) == "gitrepos" && strings.HasSuffix(path, ".yaml"):
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			texts = append(texts, string(data))
		}
		for _, text := range texts {
			for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
				var head struct {
					Kind string `json:"kind"`
				}
				if yaml.Unmarshal([]byte(doc), &head) == nil && head.Kind == "GitRepo" {
					docs = append(docs, doc)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return docs
}

// crdApplyAndCompare applies doc with kubectl (strict field validation,
// kubectl's default) and checks every field but metadata reads back as
// written, unknown ones included.
func crdApplyAndCompare(t *testing.T, k crdKubectl, doc string) {
	t.Helper()
	var want map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(doc), &want))
	meta, _ := want["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	if ns == "" {
		ns = "default"
	}
	k.run(t, doc, "apply", "-f", "-")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(k.run(t, "", "get", "-n", ns, want["kind"].(string), name, "-o", "json")), &got))
	for key, v := range want {
		if key != "metadata" {
			assert.Equal(t, v, got[key], "%s %s/%s: %s", want["kind"], ns, name, key)
		}
	}
	for key, v := range meta {
		if key != "namespace" {
			assert.Equal(t, v, got["metadata"].(map[string]any)[key], "%s %s/%s: metadata.%s", want["kind"], ns, name, key)
		}
	}
}

const crdUnknownGitRepo = `
apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: unknown-fields
  namespace: fleet-default
  labels: {team: a}
fooTopLevel: {kept: true}
spec:
  repo: https://git.example.com/apps.git
  branch: main
  pollingInterval: 1m30s
  fooBar: {nested: [1, "two", {three: 3}]}
  bundles: [{base: app, options: x}]
  targets:
  - name: dev
    clusterSelector: {matchLabels: {env: dev}}
    fooTarget: kept
  correctDrift: {enabled: true, fooDrift: kept}
`

// crdUnknownHelmOp: a HelmOp's spec is a fleet.yaml, kept whole.
const crdUnknownHelmOp = `
apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata:
  name: unknown-fields
  namespace: fleet-default
spec:
  helm: {repo: "https://charts.example.com", chart: hello, version: "1.x", fooHelm: 1}
  fooBar: {kept: [true]}
`

// crdUnknownPolicy: Policy's fields sit at the top level, unknown ones too.
const crdUnknownPolicy = `
apiVersion: fleet.cattle.io/v1alpha1
kind: Policy
metadata:
  name: strict
  namespace: fleet-default
requireServiceAccount: true
gitRepo: {allowedRepoPatterns: ["^https://git.example.com/"], fooGitRepo: kept}
fooPolicy: {kept: 1}
`

// crdColumnCase is one kind's `kubectl get` with Fleet's columns.
type crdColumnCase struct {
	resource string
	doc      string // created first
	status   string // JSON merge patch of the status subresource
	header   []string
	row      string // regular expression of the object's row
}

var crdColumnCases = []crdColumnCase{
	{
		resource: "gitrepos", doc: crdUnknownGitRepo,
		status: `{"status":{"commit":"4f1c2a9","display":{"readyBundleDeployments":"2/3"},` +
			`"conditions":[{"type":"Ready","status":"False","message":"NotReady(1) [Cluster fleet-default/c1]"}]}}`,
		header: []string{"NAMESPACE", "NAME", "REPO", "COMMIT", "BUNDLEDEPLOYMENTS-READY", "STATUS"},
		row:    `^fleet-default\s+unknown-fields\s+https://git\.example\.com/apps\.git\s+4f1c2a9\s+2/3\s+NotReady\(1\) \[Cluster fleet-default/c1\]\s*$`,
	},
	{
		resource: "helmops", doc: crdUnknownHelmOp,
		status: `{"status":{"version":"1.4.2","display":{"readyBundleDeployments":"1/1"},` +
			`"conditions":[{"type":"Ready","status":"True","message":""}]}}`,
		header: []string{"NAMESPACE", "NAME", "REPO", "CHART", "VERSION", "BUNDLEDEPLOYMENTS-READY", "STATUS"},
		row:    `^fleet-default\s+unknown-fields\s+https://charts\.example\.com\s+hello\s+1\.4\.2\s+1/1\s*$`,
	},
	{
		resource: "clusters",
		doc:      "apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1, namespace: fleet-default}\nspec: {kubeConfigSecret: c1-kubeconfig}\n",
		status: `{"status":{"display":{"readyBundles":"3/4"},"agent":{"lastSeen":"2026-11-29T21:00:00Z"},` +
			`"conditions":[{"type":"Ready","status":"False","message":"WaitApplied(1) [Bundle demo]"}]}}`,
		header: []string{"NAMESPACE", "NAME", "BUNDLES-READY", "LAST-SEEN", "STATUS"},
		row:    `^fleet-default\s+c1\s+3/4\s+2026-11-29T21:00:00Z\s+WaitApplied\(1\) \[Bundle demo\]\s*$`,
	},
	{
		resource: "clustergroups",
		doc:      "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: prod, namespace: fleet-default}\nspec: {selector: {matchLabels: {env: prod}}}\n",
		status: `{"status":{"display":{"readyClusters":"5/5","readyBundles":"10/10"},` +
			`"conditions":[{"type":"Ready","status":"True","message":""}]}}`,
		header: []string{"NAMESPACE", "NAME", "CLUSTERS-READY", "BUNDLES-READY", "STATUS"},
		row:    `^fleet-default\s+prod\s+5/5\s+10/10\s*$`,
	},
	{
		resource: "bundles",
		doc:      "apiVersion: fleet.cattle.io/v1alpha1\nkind: Bundle\nmetadata: {name: demo-app, namespace: fleet-default}\nspec: {resources: [{name: a.yaml}]}\n",
		status: `{"status":{"display":{"readyClusters":"1/2"},` +
			`"conditions":[{"type":"Ready","status":"False","message":"Modified(1)"}]}}`,
		header: []string{"NAMESPACE", "NAME", "BUNDLEDEPLOYMENTS-READY", "STATUS"},
		row:    `^fleet-default\s+demo-app\s+1/2\s+Modified\(1\)\s*$`,
	},
}

// testPrinterColumns creates c.doc (if not there yet), patches its status
// through the status subresource and reads `kubectl get -A`: Fleet's
// headers and the status's values. Applying the document again (with a
// status of its own) leaves the status as the subresource wrote it.
func testPrinterColumns(t *testing.T, k crdKubectl, c crdColumnCase) {
	k.run(t, c.doc, "apply", "-f", "-")
	var meta struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(c.doc), &meta))
	k.run(t, "", "patch", c.resource, meta.Metadata.Name, "-n", meta.Metadata.Namespace, "--subresource=status", "--type=merge", "-p", c.status)

	lines := strings.Split(strings.TrimSpace(k.run(t, "", "get", c.resource, "-A")), "\n")
	require.NotEmpty(t, lines)
	assert.Equal(t, c.header, strings.Fields(lines[0]))
	row := regexp.MustCompile(c.row)
	found := false
	for _, l := range lines[1:] {
		found = found || row.MatchString(l)
	}
	assert.True(t, found, "no row matches %s in\n%s", c.row, strings.Join(lines, "\n"))

	// The main resource ignores status: only the subresource writes it.
	k.run(t, strings.TrimSpace(c.doc)+"\nstatus: {display: {readyClusters: forged}, commit: forged}\n", "apply", "-f", "-")
	out := k.run(t, "", "get", c.resource, "-n", meta.Metadata.Namespace, meta.Metadata.Name, "-o", "jsonpath={.status}")
	assert.NotContains(t, out, "forged")
}
