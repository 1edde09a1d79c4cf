package tests

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// Secret values of TestPlan's commits: neither may appear in a plan.
const (
	planSecretOld = "hunter2-old-value"
	planSecretNew = "hunter2-new-value"
)

// planAppFiles is TestPlan's Helm bundle at version (per-cluster colors:
// blue by default, green on cluster-2, red on cluster-3) with a Secret
// whose password is secret.
func planAppFiles(version, secret string) map[string]string {
	return map[string]string{
		"app/fleet.yaml": "namespace: plan-app\nhelm:\n  values:\n    color: blue\n    version: " + version + "\n    password: " + secret + "\n" +
			"targetCustomizations:\n- name: two\n  clusterName: cluster-2\n  helm:\n    values:\n      color: green\n" +
			"- name: three\n  clusterName: cluster-3\n  helm:\n    values:\n      color: red\n",
		"app/Chart.yaml": "apiVersion: v2\nname: plan-app\nversion: 0.1.0\n",
		"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plan-cm\ndata:\n" +
			"  color: {{ .Values.color }}-{{ .Values.version }}\n",
		"app/templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: plan-secret\nstringData:\n" +
			"  password: {{ .Values.password | quote }}\n",
	}
}

// planImmutable is a raw bundle: a ConfigMap with immutable: true, whose
// data the API server refuses to change.
func planImmutable(value string) map[string]string {
	return map[string]string{
		"imm/fleet.yaml": "namespace: plan-imm\n",
		"imm/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plan-imm\nimmutable: true\ndata:\n  value: " + value + "\n",
	}
}

func merged(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestPlan: `flotilla plan` on 3 push-mode clusters with per-cluster
// customizations and a fourth whose API server is stopped. The change
// (a changed value, a new object, a removed bundle, an immutable field,
// a changed Secret) shows per cluster exactly; the stopped cluster is
// planned offline, marked with its reason; Secret values appear nowhere;
// exit status 2 with changes, 0 for the deployed commit; --branch and
// --path plan what they name.
func TestPlan(t *testing.T) {
	f := startFleet(t, 4, 4)
	repo := f.git.CreateRepo(t, "plan", merged(planAppFiles("v1", planSecretOld), planImmutable("one"), map[string]string{
		"old/fleet.yaml": "namespace: plan-old\n",
		"old/cm.yaml":    configMapDoc("plan-old", "old"),
	}))
	f.apply(t, gitRepoDoc("plan", repo.URL(), allClusters))
	v1 := repo.Head(t)
	f.waitFor(t, "plan", "v1 on 4 clusters", settledAt(v1, 12))
	// Nothing rolls out while the plans run; cluster-4 goes away.
	f.cli(t, "pause", "plan")
	f.cluster("cluster-4").Stop()
	v2files := merged(planAppFiles("v2", planSecretNew), planImmutable("two"), map[string]string{
		"app/templates/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plan-extra\ndata:\n  new: \"yes\"\n",
	})
	repo.Commit(t, v2files, "v2")
	v2 := repo.Delete(t, "drop the old bundle", "old/fleet.yaml", "old/cm.yaml")

	t.Run("head", func(t *testing.T) {
		table, stderr, err := f.cliErr(t, "plan", "plan")
		require.Equal(t, 2, exitCode(err), "changes: exit 2\n%s\n%s", table, stderr)
		js, _, err := f.cliErr(t, "plan", "plan", "-o", "json")
		require.Equal(t, 2, exitCode(err))
		for _, out := range []string{table, js} {
			for _, secret := range []string{planSecretOld, planSecretNew} {
				assert.NotContains(t, out, secret)
				assert.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte(secret)))
			}
		}
		var res plan.Result
		require.NoError(t, json.Unmarshal([]byte(js), &res))
		assert.Equal(t, v2, res.Commit)
		assert.Equal(t, v1, res.Base)
		assert.Contains(t, table, "cluster-4 (offline: cluster cluster-4 unreachable: ")
		assertPlanHead(t, res)
		t.Logf("plan:\n%s", table)
	})
	t.Run("deployed commit changes nothing", func(t *testing.T) {
		out, stderr, err := f.cliErr(t, "plan", "plan", "--commit", v1[:10])
		require.NoError(t, err, "exit 0\n%s\n%s", out, stderr)
		assert.Contains(t, out, "on 4 cluster(s) (offline: cluster-4)")
	})
	t.Run("branch", func(t *testing.T) {
		repo.Branch(t, "next")
		next := repo.CommitTo(t, "next", planAppFiles("v3", planSecretOld), "v3")
		res := planJSON(t, f, "plan", "plan", "--branch", "next", "--cluster", "cluster-2")
		assert.Equal(t, next, res.Commit)
		assert.Equal(t, "branch next", res.Source)
		require.Len(t, res.Clusters, 1)
		assert.Contains(t, planObject(t, res.Clusters[0], "plan-app", "plan-cm").Diff, "\n+  color: green-v3\n")
	})
	t.Run("path", func(t *testing.T) {
		dir := t.TempDir()
		for name, content := range merged(planAppFiles("v4", planSecretOld), planImmutable("one")) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
		res := planJSON(t, f, "plan", "plan", "--path", dir, "--cluster", "cluster-3")
		assert.Equal(t, "path "+dir, res.Source)
		require.Len(t, res.Clusters, 1)
		assert.Contains(t, planObject(t, res.Clusters[0], "plan-app", "plan-cm").Diff, "\n+  color: red-v4\n")
		assert.Equal(t, plan.Unchanged, planRelease(t, res.Clusters[0], "plan-imm").Action)
		assert.Equal(t, plan.Uninstall, planRelease(t, res.Clusters[0], "plan-old").Action, "the directory has no old bundle")
	})
	st := f.status(t, "plan")
	assert.Equal(t, v1, st.Commit, "planning deployed nothing")
}

// assertPlanHead checks the plan of v2 cluster by cluster.
func assertPlanHead(t *testing.T, res plan.Result) {
	t.Helper()
	require.Len(t, res.Clusters, 4)
	colors := map[string]string{"cluster-1": "blue", "cluster-2": "green", "cluster-3": "red", "cluster-4": "blue"}
	for _, c := range res.Clusters {
		t.Run(c.Name, func(t *testing.T) {
			assert.Equal(t, c.Name == "cluster-4", c.Offline)
			assert.Empty(t, c.Error)
			cm := planObject(t, c, "plan-app", "plan-cm")
			assert.Equal(t, plan.Update, cm.Change)
			assert.Contains(t, cm.Diff, "\n-  color: "+colors[c.Name]+"-v1\n")
			assert.Contains(t, cm.Diff, "\n+  color: "+colors[c.Name]+"-v2\n")
			assert.Equal(t, plan.Upgrade, planRelease(t, c, "plan-app").Action)
			assert.Equal(t, plan.Create, planObject(t, c, "plan-app", "plan-extra").Change)
			assert.Equal(t, plan.Update, planObject(t, c, "plan-app", "plan-secret").Change)
			assert.Equal(t, plan.Uninstall, planRelease(t, c, "plan-old").Action)
			imm := planObject(t, c, "plan-imm", "plan-imm")
			if c.Offline {
				assert.Contains(t, c.Reason, "cluster cluster-4 unreachable: ")
				assert.Empty(t, imm.Error, "offline: no API server to refuse it")
				return
			}
			assert.Contains(t, imm.Error, "field is immutable", "the API server's answer")
		})
	}
}

func planJSON(t *testing.T, f *fleet, args ...string) plan.Result {
	t.Helper()
	out, stderr, err := f.cliErr(t, append(args, "-o", "json")...)
	if err != nil {
		require.Equal(t, 2, exitCode(err), "flotilla %v: %s", args, stderr)
	}
	var res plan.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res
}

func planRelease(t *testing.T, c plan.Cluster, bundle string) plan.Release {
	t.Helper()
	for _, r := range c.Releases {
		if r.Bundle == bundle {
			return r
		}
	}
	t.Fatalf("cluster %s: no release of bundle %s in %+v", c.Name, bundle, c.Releases)
	return plan.Release{}
}

func planObject(t *testing.T, c plan.Cluster, bundle, name string) plan.Object {
	t.Helper()
	for _, o := range planRelease(t, c, bundle).Objects {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("cluster %s, bundle %s: no object %s", c.Name, bundle, name)
	return plan.Object{}
}
