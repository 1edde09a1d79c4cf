package fleetyaml_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// templateCluster is the cluster the templating tests render for.
func templateCluster() fleetyaml.Cluster {
	return fleetyaml.Cluster{
		Name:      "c1",
		Namespace: "fleet-default",
		Labels: map[string]string{
			"env":    "dev",
			"region": "eu-west",
			"management.cattle.io/cluster-display-name": "Display",
			"fleet.cattle.io/managed":                   "true",
			"objectset.rio.cattle.io/hash":              "abc",
			"kubectl.kubernetes.io/last-applied":        "{}",
		},
		Annotations: map[string]string{"a": "ann", "field.cattle.io/x": "y"},
		Values: map[string]any{
			"region": "eu", "replicas": 3.0, "nested": map[string]any{"k": "v"},
		},
	}
}

// yamlValues parses a values document as fleet.yaml values are parsed.
func yamlValues(t *testing.T, doc string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(doc), &v))
	return v
}

// optionsFromYAML returns the deployment options of the fleet.yaml doc.
func optionsFromYAML(t *testing.T, doc string) fleetyaml.Options {
	t.Helper()
	var o fleetyaml.Options
	require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
	return o
}

func helmOptions(values map[string]any) fleetyaml.Options {
	return fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Values: values}}
}

func TestTemplateRendering(t *testing.T) {
	tests := []struct {
		name   string
		values string
		want   any
	}{
		{"cluster name", `v: ${ .ClusterName }`, "c1"},
		{"cluster namespace", `v: ${ .ClusterNamespace }`, "fleet-default"},
		{"label by index", `v: ${ index .ClusterLabels "env" }`, "dev"},
		{"label by field", `v: ${ .ClusterLabels.region }`, "eu-west"},
		{"cluster value piped to sprig", `v: ${ .ClusterValues.region | upper }`, "EU"},
		{"nested cluster value", `v: ${ .ClusterValues.nested.k }`, "v"},
		{"annotation via sprig get", `v: ${ get .ClusterAnnotations "a" }`, "ann"},
		{"text around the action", `v: "pre-${ .ClusterName }-post"`, "pre-c1-post"},
		{"fleet and management labels kept", `v: '${ index .ClusterLabels "management.cattle.io/cluster-display-name" }-${ index .ClusterLabels "fleet.cattle.io/managed" }'`, "Display-true"},
		{"other cattle.io labels dropped", `v: ${ hasKey .ClusterLabels "objectset.rio.cattle.io/hash" }`, false},
		{"kubectl labels dropped", `v: ${ hasKey .ClusterLabels "kubectl.kubernetes.io/last-applied" }`, false},
		{"cattle.io annotations dropped", `v: ${ hasKey .ClusterAnnotations "field.cattle.io/x" }`, false},
		{"default for a missing label", `v: ${ get .ClusterLabels "nope" | default "fallback" }`, "fallback"},
		// As in Fleet, the rendered values are parsed as YAML.
		{"output is typed: number", `v: ${ .ClusterValues.replicas }`, 3.0},
		{"output is typed: bool", `v: ${ eq .ClusterName "c1" }`, true},
		{"output is typed: JSON flow map", `v: ${ .ClusterValues.nested | toJson }`, map[string]any{"k": "v"}},
		{"quotes in fleet.yaml do not keep a string", `v: "${ .ClusterValues.replicas }"`, 3.0},
		{"plain strings untouched", `v: "true"`, "true"},
		{"numbers untouched", `v: 1.5`, 1.5},
		{"nested maps and lists", `
v:
  list:
  - ${ .ClusterName }
  - x: ${ .ClusterLabels.env }
  - [ "${ .ClusterName }-inner" ]
  - 7`, map[string]any{"list": []any{"c1", map[string]any{"x": "dev"}, []any{"c1-inner"}, 7.0}}},
		{"key is a template", `
v:
  ${ .ClusterName }-key: 1
  ${ .ClusterLabels.env }:
    x: z`, map[string]any{"c1-key": 1.0, "dev": map[string]any{"x": "z"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fleetyaml.ProcessValues(helmOptions(yamlValues(t, tt.values)), templateCluster())
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"v": tt.want}, got.Helm.Values)
		})
	}
}

func TestTemplateFunctions(t *testing.T) {
	tests := []struct {
		fn, template string
	}{
		{"env", `${ env "HOME" }`},
		{"expandenv", `${ expandenv "$HOME" }`},
		{"tpl", `${ tpl "x" . }`},
		{"include", `${ include "x" . }`},
		{"getHostByName", `${ getHostByName "localhost" }`},
		{"toYaml", `${ toYaml .ClusterValues }`},
	}
	for _, tt := range tests {
		t.Run(tt.fn, func(t *testing.T) {
			opts := helmOptions(map[string]any{"k": tt.template})
			_, err := fleetyaml.ProcessValues(opts, templateCluster())
			require.Error(t, err)
			assert.Contains(t, err.Error(), `helm.values: k: `)
			assert.Contains(t, err.Error(), `function "`+tt.fn+`" not defined`)
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct {
		name    string
		fleet   string
		wantErr string
	}{
		{
			name: "missing label names the value path",
			fleet: `
helm:
  values:
    ok: ${ .ClusterName }
    a:
      b:
      - fine
      - ${ .ClusterLabels.missing }
`,
			wantErr: `helm.values: a.b[1]: template: value:1:17: executing "value" at <.ClusterLabels.missing>: map has no entry for key "missing"`,
		},
		{
			name: "missing cluster value",
			fleet: `
helm:
  values:
    region: ${ .ClusterValues.zone }
`,
			wantErr: `helm.values: region: template: value:1:17: executing "value" at <.ClusterValues.zone>: map has no entry for key "zone"`,
		},
		{
			name: "failing key",
			fleet: `
helm:
  values:
    nested:
      ${ .Nope }: 1
`,
			wantErr: `helm.values: nested: key "${ .Nope }": template: key:1:3: executing "key" at <.Nope>: map has no entry for key "Nope"`,
		},
		{
			name: "syntax error",
			fleet: `
helm:
  values:
    x: ${ .ClusterName
`,
			wantErr: `helm.values: x: template: value:1: unclosed action`,
		},
		{
			name: "output that breaks the YAML document",
			fleet: `
helm:
  values:
    x: ${ "[" }
`,
			wantErr: `helm.values: rendered values are not valid YAML`,
		},
		{
			name: "templateValues entry",
			fleet: `
helm:
  templateValues:
    good: ${ .ClusterName }
    bad: ${ .ClusterValues.nope }
`,
			wantErr: `helm.templateValues.bad: template: templateValue:1:17: executing "templateValue" at <.ClusterValues.nope>: map has no entry for key "nope"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fleetyaml.ProcessValues(optionsFromYAML(t, tt.fleet), templateCluster())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestTemplateDisablePreProcess(t *testing.T) {
	opts := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{
		DisablePreProcess: true,
		Values:            map[string]any{"name": "${ .ClusterName }", "env": "global.fleet.clusterLabels.env"},
		TemplateValues:    map[string]string{"t": "${ .ClusterName }"},
	}}
	got, err := fleetyaml.ProcessValues(opts, templateCluster())
	require.NoError(t, err)
	// Templates stay as they are; the label substitution still applies.
	assert.Equal(t, map[string]any{"name": "${ .ClusterName }", "env": "dev"}, got.Helm.Values)
	assert.Equal(t, "global.fleet.clusterLabels.env", opts.Helm.Values["env"], "input not modified")
}

func TestTemplateClusterLabelSubstitution(t *testing.T) {
	values := yamlValues(t, `
env: global.fleet.clusterLabels.env
display: global.fleet.clusterLabels.management.cattle.io/cluster-display-name
nested:
  region: global.fleet.clusterLabels.region
list:
- x: global.fleet.clusterLabels.env
- global.fleet.clusterLabels.env
missing: global.fleet.clusterLabels.nope
dropped: global.fleet.clusterLabels.objectset.rio.cattle.io/hash
notAPrefix: x global.fleet.clusterLabels.env
`)
	got, err := fleetyaml.ProcessValues(helmOptions(values), templateCluster())
	require.NoError(t, err)
	assert.Equal(t, yamlValues(t, `
env: dev
display: Display
nested:
  region: eu-west
list:
- x: dev
- global.fleet.clusterLabels.env
missing: ""
dropped: ""
notAPrefix: x global.fleet.clusterLabels.env
`), got.Helm.Values)
}

func TestTemplateHelmTemplateValues(t *testing.T) {
	opts := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{
		Values: map[string]any{"list": "replaced", "kept": "k"},
		TemplateValues: map[string]string{
			"list":     "- a\n- ${ .ClusterName }",
			"obj":      "zone: ${ .ClusterValues.region }\nreplicas: ${ .ClusterValues.replicas }",
			"replicas": "${ .ClusterValues.replicas }",
			"text":     "${ .ClusterLabels.env }",
			"empty":    "",
		},
	}}
	got, err := fleetyaml.ProcessValues(opts, templateCluster())
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"list":     []any{"a", "c1"},
		"obj":      map[string]any{"zone": "eu", "replicas": 3.0},
		"replicas": 3.0,
		"text":     "dev",
		"empty":    nil,
		"kept":     "k",
	}, got.Helm.Values)
	assert.Equal(t, map[string]any{"list": "replaced", "kept": "k"}, opts.Helm.Values, "input not modified")

	// templateValues alone, without values.
	got, err = fleetyaml.ProcessValues(fleetyaml.Options{Helm: &fleetyaml.HelmOptions{
		TemplateValues: map[string]string{"n": "${ .ClusterName }"}}}, templateCluster())
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"n": "c1"}, got.Helm.Values)
}

func TestTemplateWithoutLabelsOrHelm(t *testing.T) {
	values := map[string]any{"name": "${ .ClusterName }", "env": "global.fleet.clusterLabels.env"}
	noLabels := fleetyaml.Cluster{Name: "c1", Labels: map[string]string{"objectset.rio.cattle.io/hash": "x"}}

	// Fleet skips all processing for a cluster without (usable) labels.
	got, err := fleetyaml.ProcessValues(helmOptions(values), noLabels)
	require.NoError(t, err)
	assert.Equal(t, values, got.Helm.Values)

	got, err = fleetyaml.ProcessValues(fleetyaml.Options{DefaultNamespace: "d"}, noLabels)
	require.NoError(t, err)
	assert.Equal(t, fleetyaml.Options{DefaultNamespace: "d"}, got)

	// With labels, Fleet gives a bundle without helm options empty ones.
	got, err = fleetyaml.ProcessValues(fleetyaml.Options{DefaultNamespace: "d"}, templateCluster())
	require.NoError(t, err)
	assert.Equal(t, fleetyaml.Options{DefaultNamespace: "d", Helm: &fleetyaml.HelmOptions{}}, got)

	// Helm options without values get an empty values map.
	got, err = fleetyaml.ProcessValues(fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Chart: "c"}}, templateCluster())
	require.NoError(t, err)
	assert.Equal(t, &fleetyaml.HelmOptions{Chart: "c", Values: map[string]any{}}, got.Helm)
}

func TestTemplateDoesNotModifyInputs(t *testing.T) {
	values := yamlValues(t, `
a:
  b: [ "${ .ClusterName }", { c: global.fleet.clusterLabels.env } ]
k: '${ $_ := set .ClusterValues "added" "x" }${ .ClusterName }'
`)
	opts := helmOptions(values)
	c := templateCluster()
	before, err := json.Marshal(opts)
	require.NoError(t, err)
	clusterBefore, err := json.Marshal(c)
	require.NoError(t, err)

	got, err := fleetyaml.ProcessValues(opts, c)
	require.NoError(t, err)
	assert.Equal(t, "c1", got.Helm.Values["k"])
	after, err := json.Marshal(opts)
	require.NoError(t, err)
	clusterAfter, err := json.Marshal(c)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after))
	assert.JSONEq(t, string(clusterBefore), string(clusterAfter))
}

func TestTemplateDeterministic(t *testing.T) {
	values := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		values[k] = map[string]any{"name": "${ .ClusterName }-" + k, "n": 1.0, "l": []any{k, "${ .ClusterLabels.env }"}}
	}
	opts := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Values: values,
		TemplateValues: map[string]string{"x": "${ .ClusterName }", "y": "[1, 2]"}}}
	first, err := fleetyaml.ProcessValues(opts, templateCluster())
	require.NoError(t, err)
	for range 20 {
		again, err := fleetyaml.ProcessValues(opts, templateCluster())
		require.NoError(t, err)
		require.Equal(t, first.Hash(), again.Hash())
	}
}

func TestTemplateDeploymentID(t *testing.T) {
	const manifestID = "s-0123456789abcdef"
	opts := optionsFromYAML(t, `
helm:
  chart: ./chart
  values:
    env: ${ .ClusterLabels.env }
`)
	id := func(labels ...string) string {
		t.Helper()
		c := fleetyaml.Cluster{Name: "c1", Namespace: "fleet-default", Labels: map[string]string{}}
		for i := 0; i < len(labels); i += 2 {
			c.Labels[labels[i]] = labels[i+1]
		}
		got, err := fleetyaml.ProcessValues(opts, c)
		require.NoError(t, err)
		return fleetyaml.DeploymentID(manifestID, got)
	}
	base := id("env", "dev", "team", "a")
	assert.Equal(t, base, id("env", "dev", "team", "b"), "a label no template uses does not change the ID")
	assert.Equal(t, base, id("env", "dev"), "nor does removing it")
	assert.NotEqual(t, base, id("env", "prod", "team", "a"), "a label a template uses changes the ID")
}

func TestTemplateKeepsPlainValues(t *testing.T) {
	// Values without "${" survive Fleet's YAML round trip unchanged.
	var values map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
		"strings": ["", " lead", "trail ", "multi\nline\n", "tab\there", "yes", "no", "on", "off", "y", "n",
			"true", "null", "~", "0x10", "0o17", "1e3", "1_000", ".5", "-", "- x", "a: b", "#c", "a #c", "'q'", "\"dq\"",
			"{}", "[]", "*a", "&a", "!t", "%p", "@a", "`+"`b`"+`", "|", ">", "?", ":", "x:", "$", "{", "}", "$}",
			"ünïcödé", "<html>&", "\\", "2024-01-01", "12:30:00", "=", "<<"],
		"numbers": [0, -1, 1.5, 1e21, 12345678901234567890, 1e-7, 3.0, -0.0],
		"bools": [true, false],
		"null": null,
		"empty": {"map": {}, "list": []},
		"nested": {"a": [{"b": [[1, "x"]]}], "": "empty key", "key with space": 1, "1": "numeric key", "true": "bool key"}
	}`), &values))
	got, err := fleetyaml.ProcessValues(helmOptions(values), templateCluster())
	require.NoError(t, err)
	assert.Equal(t, values, got.Helm.Values)
}
