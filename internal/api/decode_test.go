package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

func TestDecode_FleetAndFlotillaDocuments(t *testing.T) {
	in := `
apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: simple
  namespace: fleet-local
spec:
  repo: https://github.com/rancher/fleet-examples
  paths:
  - simple
  helmSecretName: unused-by-flotilla
  helmRepoURLRegex: https://charts\.example\.com/.*
  targets:
  - name: dev
    clusterSelector:
      matchLabels:
        env: dev
status:
  commit: abc
---
apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata:
  name: default
  namespace: fleet-default
spec:
  selector:
    matchExpressions:
    - {key: env, operator: In, values: [dev, prod]}
---
apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: c1
  labels: {env: dev}
---
apiVersion: v1
kind: Secret
metadata: {name: git-creds}
type: kubernetes.io/basic-auth
stringData: {username: bot, password: s3cret}
`
	docs, err := api.Decode(strings.NewReader(in), "fleet.yaml")
	require.NoError(t, err)
	require.Len(t, docs, 4)
	gr := docs[0].GitRepo
	require.NotNil(t, gr)
	assert.Equal(t, "fleet-local/simple", docs[0].Name())
	assert.Equal(t, []string{"simple"}, gr.Spec.EffectivePaths())
	assert.Equal(t, api.DefaultPollingInterval, gr.Spec.Polling())
	assert.Equal(t, "dev", gr.Spec.EffectiveTargets()[0].Name)
	assert.Equal(t, api.KindClusterGroup, docs[1].Kind())
	assert.Equal(t, "dev", docs[2].Cluster.Metadata.Labels["env"])
	assert.Equal(t, api.DefaultNamespace, docs[3].Secret.Metadata.Namespace, "secrets default to the GitRepo default namespace")
	user, pass := docs[3].Secret.Credentials()
	assert.Equal(t, "bot", user)
	assert.Equal(t, "s3cret", pass)
}

// A Cluster carries Fleet's agent settings, under Fleet's names.
func TestDecode_ClusterAgentSettings(t *testing.T) {
	in := `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata: {name: prod-eu, namespace: fleet-default}
spec:
  agentNamespace: cattle-fleet-system
  agentEnvVars: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
  agentTolerations: [{key: dedicated, operator: Equal, value: fleet, effect: NoSchedule}]
  agentAffinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]
  agentResources: {limits: {memory: 256Mi}}
  agentUpgradeWindows: [{schedule: "0 22 * * 1-5", duration: 2h, timeZone: Europe/Berlin}]
`
	docs, err := api.Decode(strings.NewReader(in), "cluster.yaml")
	require.NoError(t, err)
	require.Len(t, docs, 1)
	spec := docs[0].Cluster.Spec
	assert.True(t, spec.HasAgentSettings())
	assert.Equal(t, "cattle-fleet-system", spec.AgentNamespace)
	assert.Equal(t, "HTTPS_PROXY", spec.AgentEnvVars[0].Name)
	assert.Equal(t, "dedicated", spec.AgentTolerations[0].Key)
	require.NotNil(t, spec.AgentAffinity.NodeAffinity)
	assert.Equal(t, "256Mi", spec.AgentResources.Limits.Memory().String())
	assert.Equal(t, []api.Window{{Schedule: "0 22 * * 1-5", Duration: "2h", TimeZone: "Europe/Berlin"}}, spec.AgentUpgradeWindows)
	assert.False(t, api.ClusterSpec{}.HasAgentSettings())
	assert.True(t, api.ClusterSpec{AgentUpgradeWindows: spec.AgentUpgradeWindows}.HasAgentSettings())
}

func TestDecode_Defaults(t *testing.T) {
	docs, err := api.Decode(strings.NewReader("apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'http://git/app.git'}\n"), "app.yaml")
	require.NoError(t, err)
	spec := docs[0].GitRepo.Spec
	assert.Equal(t, api.DefaultNamespace, docs[0].GitRepo.Metadata.Namespace)
	assert.Equal(t, []api.TargetSelector{{Name: "default", ClusterGroup: "default"}}, spec.EffectiveTargets())
	assert.Empty(t, spec.Branch, "an empty branch means the remote's HEAD")
}

func TestDecode_InvalidDocumentsNameFileAndField(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"missing repo", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {}",
			[]string{"in.yaml#1", "GitRepo fleet-default/app", "spec.repo: Required value"}},
		{"bad selector key", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec:\n  repo: https://g/a.git\n  targets:\n  - clusterSelector: {matchLabels: {'bad key!': x}}",
			[]string{"spec.targets[0].clusterSelector.matchLabels", "bad key!"}},
		{"bad label value", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1, labels: {env: 'not valid!'}}",
			[]string{"Cluster c1", "metadata.labels", "not valid!"}},
		{"credentials in url", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'https://bot:hunter2@git/a.git'}",
			[]string{"spec.repo", "clientSecretName"}},
		{"git:// not supported", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'git://git/a.git'}",
			[]string{"spec.repo", "Unsupported value", `"ssh"`}},
		{"password in ssh url", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'ssh://git:hunter2@git/a.git'}",
			[]string{"spec.repo", "clientSecretName"}},
		{"password in scp-like url", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'git:hunter2@git:a.git'}",
			[]string{"spec.repo", "clientSecretName"}},
		{"scp-like without path", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'git@github.com:'}",
			[]string{"spec.repo", "needs a host and a path"}},
		{"escaping path", "apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: 'https://g/a.git', paths: ['../x']}",
			[]string{"spec.paths[0]", ".."}},
		{"bad cluster name", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: Prod_EU}",
			[]string{"metadata.name", "Prod_EU"}},
		{"bad agent namespace", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {agentNamespace: Agents}",
			[]string{"Cluster c1", "spec.agentNamespace", "Agents"}},
		{"bad agent env", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {agentEnvVars: [{name: 'A B', value: x}]}",
			[]string{"spec.agentEnvVars[0].name", "A B"}},
		{"bad toleration effect", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {agentTolerations: [{key: k, operator: Exists, effect: Sometimes}]}",
			[]string{"spec.agentTolerations[0].effect", "Sometimes"}},
		{"toleration Exists with value", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {agentTolerations: [{key: k, operator: Exists, value: v}]}",
			[]string{"spec.agentTolerations[0].operator", "value must be empty"}},
		{"toleration Equal without key", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {agentTolerations: [{operator: Equal, value: v}]}",
			[]string{"spec.agentTolerations[0].operator", "key is empty"}},
		{"toleration seconds without NoExecute", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {agentTolerations: [{key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}]}",
			[]string{"spec.agentTolerations[0].effect", "NoExecute"}},
		{"group without selector", "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterGroup\nmetadata: {name: g}\nspec: {}",
			[]string{"spec.selector: Required value"}},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}",
			[]string{"in.yaml#1", "unsupported kind \"Pod\""}},
		{"secret with a bad key", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {'a b': hunter2}",
			[]string{"Secret fleet-default/s", "stringData", "a b"}},
		{"configmap with a bad key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {'a/b': x}",
			[]string{"ConfigMap fleet-default/c", "data", "a/b"}},
		{"configmap key in data and binaryData", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: x}\nbinaryData: {k: eA==}",
			[]string{"ConfigMap fleet-default/c", "binaryData[k]", "Duplicate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := api.Decode(strings.NewReader(tt.doc), "in.yaml")
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "hunter2", "credentials never appear in errors")
		})
	}
}

func TestDecode_SSHRepos(t *testing.T) {
	for _, repo := range []string{
		"git@github.com:org/fleet.git",
		"ssh://git@github.com:2222/org/fleet.git",
		"git+ssh://deploy@git.example.com/org/fleet.git",
		"ssh://127.0.0.1:2222/srv/git/app.git",
	} {
		t.Run(repo, func(t *testing.T) {
			doc := "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec: {repo: '" + repo + "', clientSecretName: deploy-key}"
			_, err := api.Decode(strings.NewReader(doc), "in.yaml")
			require.NoError(t, err)
		})
	}
}
