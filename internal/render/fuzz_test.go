package render_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// boundSpec is the GitRepo FuzzForGitRepo targets with: every cluster,
// bound to a namespace and a service account.
var boundSpec = api.GitRepoSpec{
	TargetNamespace: "bound",
	ServiceAccount:  "deployer",
	Targets:         []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{}}},
}

// fuzzClusters are the clusters FuzzForGitRepo targets: one in a group,
// with template values, and one with neither.
var fuzzClusters = []bundle.Cluster{
	{Name: "c1", Namespace: "fleet-default", Labels: map[string]string{"env": "dev", "region": "eu"},
		Values: map[string]any{"replicas": 3.0, "ns": "other"}, Groups: []bundle.Group{{Name: "default"}}},
	{Name: "c2", Namespace: "fleet-default", Labels: map[string]string{"env": "prod"}},
}

// boundsSeeds are fleet.yaml files that try to leave the GitRepo's
// namespace or service account, or template their way out of it.
var boundsSeeds = []string{
	"namespace: other\n",
	"defaultNamespace: other\nserviceAccount: admin\n",
	"targetCustomizations:\n- name: escape\n  clusterSelector: {matchLabels: {env: prod}}\n  namespace: kube-system\n",
	"targetCustomizations:\n- name: sa\n  clusterName: c1\n  serviceAccount: cluster-admin\n",
	"targetCustomizationMode: AllMatches\ntargetCustomizations:\n- clusterSelector: {}\n  namespace: bound\n- clusterGroup: default\n  namespace: x\n",
	"helm:\n  valuesFrom: [{secretKeyRef: {name: s, namespace: kube-system, key: k}}]\n",
	"targetCustomizations:\n- clusterName: c2\n  helm: {valuesFrom: [{configMapKeyRef: {name: cm, namespace: other}}]}\n",
	"helm:\n  values:\n    ns: ${ .ClusterValues.ns }\n    r: ${ .ClusterValues.replicas }\n  templateValues: {t: '${ .ClusterName }'}\n",
	"helm:\n  values: {v: '${ repeat 2000000000 \"x\" }'}\n",
	"targets:\n- clusterSelector: {matchLabels: {env: dev}}\n  doNotDeploy: true\n",
	"targetCustomizations:\n- clusterSelector: {matchExpressions: [{key: env, operator: In}]}\n",
}

// FuzzForGitRepo: a repository author's fleet.yaml, read and targeted as a
// rollout targets it for a GitRepo with a targetNamespace and a
// serviceAccount, never deploys outside them: every deployment goes to
// the bound namespace, acts as the bound service account and reads
// valuesFrom only there. Every refusal names the bundle and the cluster;
// one for leaving the bounds or for a template over its budget is
// classed Invalid and names the fleet.yaml; targeting stays within the
// template time budget (with a margin).
func FuzzForGitRepo(f *testing.F) {
	examples, _ := filepath.Glob("../bundle/testdata/fleet-examples/*/*/fleet.yaml")
	for _, file := range examples {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range boundsSeeds {
		f.Add([]byte(s))
	}
	root := f.TempDir()
	dir := filepath.Join(root, "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip()
		}
		if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, m, err := bundle.Read(root, "app", "repo")
		if err != nil {
			return // FuzzRead in internal/bundle holds Read to its contract
		}
		b.Options = render.GitRepoOptions(b.Options, boundSpec)
		for _, c := range fuzzClusters {
			start := time.Now()
			d, err := render.ForGitRepo(b, m.ID(), c, boundSpec)
			// A margin over the time budget, as in fleetyaml's
			// FuzzProcessValues: parsing the templates' output comes on
			// top, and fuzz workers are slow.
			if elapsed := time.Since(start); elapsed > 3*fleetyaml.DefaultTemplateTime {
				t.Fatalf("targeting %s took %s", c.Name, elapsed)
			}
			if err != nil {
				checkTargetingError(t, err, b, c)
				continue
			}
			if d.Deploy {
				checkBound(t, d, c)
			}
		}
	})
}

// checkTargetingError holds a refusal to the contract: it names the
// bundle and the cluster, and a bounds or budget refusal is Invalid and
// names the file.
func checkTargetingError(t *testing.T, err error, b bundle.Bundle, c bundle.Cluster) {
	t.Helper()
	if !strings.Contains(err.Error(), "bundle "+b.Name+": cluster "+c.Name+": ") {
		t.Fatalf("error %q does not name bundle %s and cluster %s", err, b.Name, c.Name)
	}
	var be *target.BoundsError
	var tb *fleetyaml.TemplateBudgetError
	switch {
	case errors.As(err, &be):
		if be.Class() != outcome.Invalid {
			t.Fatalf("bounds error %v classed %q", err, be.Class())
		}
	case errors.As(err, &tb):
		if tb.Class() != outcome.Invalid {
			t.Fatalf("budget error %v classed %q", err, tb.Class())
		}
	default:
		return
	}
	if !strings.Contains(err.Error(), "app/fleet.yaml") {
		t.Fatalf("error %q does not name the fleet.yaml", err)
	}
}

// checkBound checks that a deployment stays inside boundSpec.
func checkBound(t *testing.T, d render.Deployment, c bundle.Cluster) {
	t.Helper()
	if d.Namespace != boundSpec.TargetNamespace || render.Namespace(d.Options) != boundSpec.TargetNamespace {
		t.Fatalf("cluster %s: deploys to namespace %q (options %q), outside %q", c.Name, d.Namespace, render.Namespace(d.Options), boundSpec.TargetNamespace)
	}
	if d.Options.ServiceAccount != boundSpec.ServiceAccount {
		t.Fatalf("cluster %s: deploys as %q, not as %q", c.Name, d.Options.ServiceAccount, boundSpec.ServiceAccount)
	}
	if d.Options.Helm == nil {
		return
	}
	for i, vf := range d.Options.Helm.ValuesFrom {
		for _, ref := range []*bundle.KeyRef{vf.ConfigMapKeyRef, vf.SecretKeyRef} {
			if ref != nil && ref.Namespace != "" && ref.Namespace != boundSpec.TargetNamespace {
				t.Fatalf("cluster %s: valuesFrom[%d] reads namespace %q", c.Name, i, ref.Namespace)
			}
		}
	}
}
