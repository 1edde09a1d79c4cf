package fleetyaml_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// TestTemplateBudget feeds value templates that would run for minutes or
// allocate gigabytes: each is refused within the time budget (plus the
// search for the failing value), with the budget it ran out of, without
// allocating much more than the budget. The time budget is wall-clock: the
// cases of the other budgets run with a minute of it, so that a loaded
// machine (2 cores, -race) does not make "output" or "cat doubling" run out
// of time before they run out of what they test, and the cases run one at
// a time.
func TestTemplateBudget(t *testing.T) {
	tests := []struct {
		name     string
		template string
		resource string // the budget that runs out
	}{
		{"repeat", `${ repeat 2000000000 "x" }`, "memory"},
		{"repeat chain", `${ repeat 1000 "x" | repeat 1000 | repeat 1000 }`, "memory"},
		{"cat doubling", `${ $a := repeat 1000000 "x" }${ $a = cat $a $a }${ $a = cat $a $a }${ $a = cat $a $a }${ $a = cat $a $a }${ $a = cat $a $a }${ $a = cat $a $a }${ $a = cat $a $a }`, "memory"},
		{"indent", `${ indent 2000000000 "x" }`, "memory"},
		{"nindent", `${ nindent 2000000000 "x" }`, "memory"},
		{"until", `${ until 1000000000 | len }`, "memory"},
		{"untilStep", `${ untilStep 0 1000000000 1 | len }`, "memory"},
		{"seq", `${ seq 1 1000000000 }`, "memory"},
		{"randAlpha", `${ randAlpha 1000000000 }`, "memory"},
		{"randBytes", `${ randBytes 1000000000 }`, "memory"},
		{"replace", `${ replace "" (repeat 100000 "y") (repeat 100000 "z") }`, "memory"},
		{"regexReplaceAll", `${ regexReplaceAll "z" (repeat 100000 "z") (repeat 100000 "y") }`, "memory"},
		{"join", `${ join (repeat 1000000 "s") (until 1000) }`, "memory"},
		{"wrapWith", `${ wrapWith 1 (repeat 100000 "s") (repeat 100000 "z") }`, "memory"},
		{"printf widths", `${ printf "` + strings.Repeat("%999999d", 100) + `" }`, "memory"},
		{"output", `${ range until 100000 }` + strings.Repeat("x", 100) + `${ end }`, "output"},
		{"range int", `${ range 2000000000 }${ end }`, "time"},
		{"nested range", `${ $l := until 100000 }${ range $l }${ range $l }${ end }${ end }`, "time"},
		{"recursion", `${ define "a" }${ template "a" }${ end }${ template "a" }`, "template calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.resource != "time" {
				defer fleetyaml.SetTemplateTime(time.Minute)()
			}
			opts := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{TemplateValues: map[string]string{"bomb": tt.template}}}
			start := time.Now()
			_, err := fleetyaml.ProcessValues(opts, templateCluster())
			elapsed := time.Since(start)
			var be *fleetyaml.TemplateBudgetError
			require.ErrorAs(t, err, &be)
			assert.Equal(t, tt.resource, be.Resource)
			assert.Equal(t, outcome.Invalid, be.Class())
			assert.Contains(t, err.Error(), "helm.templateValues.bomb: template exceeds its "+tt.resource+" budget")
			if tt.resource == "time" {
				assert.Less(t, elapsed, fleetyaml.DefaultTemplateTime+2*time.Second)
			}
		})
	}
}

// TestTemplateBudgetMemory checks that the repeat bomb of issue 28 is
// refused before it allocates: the heap grows by far less than the
// 2 GB it asks for.
func TestTemplateBudgetMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := fleetyaml.ProcessValues(helmOptions(yamlValues(t, `v: ${ repeat 2000000000 "x" }`)), templateCluster())
	runtime.ReadMemStats(&after)
	var be *fleetyaml.TemplateBudgetError
	require.ErrorAs(t, err, &be)
	assert.Contains(t, err.Error(), "helm.values: v: ", "the error names the value")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated while refusing the bomb")
}

// TestTemplateBudgetRealTemplates checks that templates as repositories
// write them stay far inside the budget, including one that makes a
// sizeable document.
func TestTemplateBudgetRealTemplates(t *testing.T) {
	values := yamlValues(t, `
name: ${ .ClusterName | upper }
hosts: '${ range $i := until 50 }${ printf "h%d.%s," $i $.ClusterName }${ end }'
note: '${ repeat 3 "ab" }'
nested: ${ .ClusterValues.nested | toJson }
`)
	got, err := fleetyaml.ProcessValues(helmOptions(values), templateCluster())
	require.NoError(t, err)
	assert.Equal(t, "C1", got.Helm.Values["name"])
	assert.Equal(t, "ababab", got.Helm.Values["note"])
	assert.True(t, strings.HasPrefix(got.Helm.Values["hosts"].(string), "h0.c1,h1.c1,"))
	assert.Equal(t, map[string]any{"k": "v"}, got.Helm.Values["nested"])
	big := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{TemplateValues: map[string]string{
		"big": `${ repeat 100000 "0123456789" | quote }`,
	}}}
	got, err = fleetyaml.ProcessValues(big, templateCluster())
	require.NoError(t, err, "a 1 MB value fits the budget")
	assert.Len(t, got.Helm.Values["big"], 1_000_000)
}
