package target

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// customizeNaive evaluates every customization for c, in order: what
// Customize did before customizations were indexed.
func customizeNaive(t *testing.T, b fleetyaml.Bundle, c fleetyaml.Cluster) (fleetyaml.Options, bool) {
	t.Helper()
	cs, err := customizations(b)
	require.NoError(t, err)
	var custom fleetyaml.Options
	for _, cu := range cs {
		if !cu.matcher.matches(c) {
			continue
		}
		if cu.target.DoNotDeploy {
			return fleetyaml.Options{}, false
		}
		if b.Spec.TargetCustomizationMode != fleetyaml.AllMatches {
			custom = cu.target.Options
			break
		}
		custom = fleetyaml.MergeOptions(custom, cu.target.Options)
	}
	return fleetyaml.MergeOptions(b.Options, custom), true
}

// The index picks exactly the customizations a full scan would, in the
// same order, for every kind of criterion and both modes.
func TestCompiledCustomizeMatchesFullScan(t *testing.T) {
	doc := `defaultNamespace: base
targetCustomizations:
- {name: by-name-late, clusterName: c3, defaultNamespace: late}
- {name: by-group, clusterGroup: prod, defaultNamespace: prod-ns, helm: {values: {g: 1}}}
- {name: by-name, clusterName: c1, defaultNamespace: c1-ns, helm: {values: {n: 1}}}
- {name: display, clusterName: Pretty, defaultNamespace: pretty-ns}
- {name: by-label, clusterSelector: {matchLabels: {env: dev}}, defaultNamespace: dev-ns, helm: {values: {l: 1}}}
- {name: name-and-group, clusterName: c2, clusterGroup: prod, defaultNamespace: both}
- {name: skip, clusterName: c4, doNotDeploy: true}
- {name: by-name-again, clusterName: c1, defaultNamespace: c1-second, helm: {values: {n: 2}}}
- {name: nothing}
`
	clusters := []fleetyaml.Cluster{
		clusterWith("c1"), clusterWith("c1", "env", "dev"), clusterWith("c2"), clusterWith("c3"), clusterWith("c4"),
		clusterWith("c5", DisplayNameLabel, "Pretty"), clusterWith("c6", "env", "dev"),
	}
	clusters[2].Groups = []fleetyaml.Group{{Name: "prod"}}
	clusters[3].Groups = []fleetyaml.Group{{Name: "staging"}, {Name: "prod"}}
	clusters[6].Groups = []fleetyaml.Group{{Name: "prod"}}
	for _, mode := range []string{"", "targetCustomizationMode: AllMatches\n"} {
		b := bundleFromYAML(t, "app", mode+doc)
		p := Compile(b, nil)
		for _, c := range clusters {
			wantOpts, wantDeploy := customizeNaive(t, b, c)
			opts, deploy, err := p.Customize(c)
			require.NoError(t, err)
			assert.Equal(t, wantDeploy, deploy, "%q %s", mode, c.Name)
			assert.Equal(t, wantOpts, opts, "%q %s", mode, c.Name)
		}
	}
	// Spot checks that the cases above mean something.
	b := bundleFromYAML(t, "app", doc)
	opts, _, _ := Compile(b, nil).Customize(clusters[3])
	assert.Equal(t, "late", opts.DefaultNamespace, "FirstMatch: by-name-late comes before by-group")
	opts, _, _ = Compile(b, nil).Customize(clusters[5])
	assert.Equal(t, "pretty-ns", opts.DefaultNamespace, "clusterName matches the display name")
	_, deploy, _ := Compile(b, nil).Customize(clusters[4])
	assert.False(t, deploy)
}

// Targeting many clusters compiles the bundle's selectors once; with one
// clusterName customization per cluster the work per cluster stays
// constant (BenchmarkCompiledCustomize measures it).
func TestCompiledIndexesPerClusterCustomizations(t *testing.T) {
	b := manyCustomizations(t, 100)
	p := Compile(b, nil)
	assert.Empty(t, p.general)
	assert.Len(t, p.byName, 100)
	assert.Equal(t, []int{42}, p.candidates(clusterWith("c42")))
	opts, _, err := p.Customize(clusterWith("c42"))
	require.NoError(t, err)
	assert.Equal(t, "ns-42", opts.DefaultNamespace)
}

func manyCustomizations(t testing.TB, n int) fleetyaml.Bundle {
	b := fleetyaml.Bundle{Name: "app"}
	for i := range n {
		var tgt fleetyaml.Target
		tgt.Name, tgt.ClusterName, tgt.DefaultNamespace = fmt.Sprintf("t%d", i), fmt.Sprintf("c%d", i), fmt.Sprintf("ns-%d", i)
		b.Spec.TargetCustomizations = append(b.Spec.TargetCustomizations, tgt)
	}
	return b
}

// BenchmarkCompiledCustomize targets 1,000 clusters with 1,000
// per-cluster customizations: compile once, then one lookup per cluster.
func BenchmarkCompiledCustomize(b *testing.B) {
	bn := manyCustomizations(b, 1000)
	clusters := make([]fleetyaml.Cluster, 1000)
	for i := range clusters {
		clusters[i] = fleetyaml.Cluster{Name: fmt.Sprintf("c%d", i)}
	}
	for b.Loop() {
		p := Compile(bn, nil)
		for _, c := range clusters {
			if _, _, err := p.Customize(c); err != nil {
				b.Fatal(err)
			}
		}
	}
}
