package strategy_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

func pct(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
func num(i int) *intstr.IntOrString    { v := intstr.FromInt(i); return &v }
func ptr[T any](v T) *T                { return &v }

// named returns clusters with the given names, without labels or groups.
func named(names ...string) []fleetyaml.Cluster {
	cs := make([]fleetyaml.Cluster, len(names))
	for i, n := range names {
		cs[i] = fleetyaml.Cluster{Name: n}
	}
	return cs
}

// numbered returns n clusters c000, c001…, listed in reverse order so
// that tests see Compute sort them.
func numbered(n int) []fleetyaml.Cluster {
	cs := make([]fleetyaml.Cluster, n)
	for i := range n {
		cs[n-1-i] = fleetyaml.Cluster{Name: fmt.Sprintf("c%03d", i)}
	}
	return cs
}

func names(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("c%03d", i))
	}
	return out
}

func TestComputeDefaults(t *testing.T) {
	plan, err := strategy.Compute(nil, named("b", "c", "a"))
	require.NoError(t, err)
	assert.Equal(t, strategy.Plan{
		MaxUnavailable:           3, // 100%
		MaxUnavailablePartitions: 0,
		Partitions:               []strategy.Partition{{Name: "all", MaxUnavailable: 3, Clusters: []string{"a", "b", "c"}}},
		FailureThreshold:         -1,
		ReadyTimeout:             300 * time.Second,
	}, plan)

	empty, err := strategy.Compute(&fleetyaml.RolloutStrategy{}, named("b", "c", "a"))
	require.NoError(t, err)
	assert.Equal(t, plan, empty, "an empty strategy is the defaults")
}

func TestComputeNoClusters(t *testing.T) {
	plan, err := strategy.Compute(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, plan.MaxUnavailable, "never below 1")
	assert.Equal(t, []strategy.Partition{{Name: "all", MaxUnavailable: 1, Clusters: []string{}}}, plan.Partitions)

	js, err := json.Marshal(plan.Partitions)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"name":"all","maxUnavailable":1,"clusters":[]}]`, string(js), "clusters is a list, not null")
}

// partitionShape is a partition without its cluster list, to compare
// large plans.
type partitionShape struct {
	Name           string
	Size           int
	MaxUnavailable int
}

func shapes(ps []strategy.Partition) []partitionShape {
	out := make([]partitionShape, len(ps))
	for i, p := range ps {
		out[i] = partitionShape{p.Name, len(p.Clusters), p.MaxUnavailable}
	}
	return out
}

func TestComputeAutoPartitions(t *testing.T) {
	tests := []struct {
		name     string
		rs       *fleetyaml.RolloutStrategy
		clusters int
		want     []partitionShape
	}{
		{"below the threshold: one partition", nil, 199,
			[]partitionShape{{"all", 199, 199}}},
		// 25% of 200 is 50.
		{"at the threshold", nil, 200,
			[]partitionShape{{"auto-partition-0", 50, 50}, {"auto-partition-1", 50, 50}, {"auto-partition-2", 50, 50}, {"auto-partition-3", 50, 50}}},
		// 25% of 250 is 62.5, rounded up to 63; the last partition holds
		// the remaining 250-3*63 = 61.
		{"250 clusters", nil, 250,
			[]partitionShape{{"auto-partition-0", 63, 63}, {"auto-partition-1", 63, 63}, {"auto-partition-2", 63, 63}, {"auto-partition-3", 61, 61}}},
		// maxUnavailable 10% is scaled to each partition: 6.3 → 7, 6.1 → 7;
		// the bundle's is 10% of 250 = 25.
		{"maxUnavailable per auto partition", &fleetyaml.RolloutStrategy{MaxUnavailable: pct("10%")}, 250,
			[]partitionShape{{"auto-partition-0", 63, 7}, {"auto-partition-1", 63, 7}, {"auto-partition-2", 63, 7}, {"auto-partition-3", 61, 7}}},
		{"count size", &fleetyaml.RolloutStrategy{AutoPartitionSize: num(100)}, 250,
			[]partitionShape{{"auto-partition-0", 100, 100}, {"auto-partition-1", 100, 100}, {"auto-partition-2", 50, 50}}},
		// 30% of 10 is 3.
		{"own threshold", &fleetyaml.RolloutStrategy{AutoPartitionThreshold: ptr(10), AutoPartitionSize: pct("30%")}, 10,
			[]partitionShape{{"auto-partition-0", 3, 3}, {"auto-partition-1", 3, 3}, {"auto-partition-2", 3, 3}, {"auto-partition-3", 1, 1}}},
		{"own threshold not reached", &fleetyaml.RolloutStrategy{AutoPartitionThreshold: ptr(11)}, 10,
			[]partitionShape{{"all", 10, 10}}},
		{"size 0 turns auto partitions off", &fleetyaml.RolloutStrategy{AutoPartitionSize: num(0)}, 250,
			[]partitionShape{{"all", 250, 250}}},
		{"size 0% is at least 1", &fleetyaml.RolloutStrategy{AutoPartitionThreshold: ptr(3), AutoPartitionSize: pct("0%")}, 3,
			[]partitionShape{{"auto-partition-0", 1, 1}, {"auto-partition-1", 1, 1}, {"auto-partition-2", 1, 1}}},
		{"size above the count", &fleetyaml.RolloutStrategy{AutoPartitionThreshold: ptr(1), AutoPartitionSize: num(10)}, 4,
			[]partitionShape{{"auto-partition-0", 4, 4}}},
		{"threshold 0 without clusters", &fleetyaml.RolloutStrategy{AutoPartitionThreshold: ptr(0)}, 0,
			[]partitionShape{{"all", 0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := strategy.Compute(tt.rs, numbered(tt.clusters))
			require.NoError(t, err)
			assert.Equal(t, tt.want, shapes(plan.Partitions))
			// The clusters, sorted by name, are cut in order.
			var all []string
			for _, p := range plan.Partitions {
				assert.True(t, slices.IsSorted(p.Clusters), p.Name)
				all = append(all, p.Clusters...)
			}
			assert.Equal(t, names(0, tt.clusters), all)
		})
	}
}

func TestComputeAutoPartitionMembers(t *testing.T) {
	plan, err := strategy.Compute(nil, numbered(250))
	require.NoError(t, err)
	require.Len(t, plan.Partitions, 4)
	assert.Equal(t, names(0, 63), plan.Partitions[0].Clusters)
	assert.Equal(t, names(63, 126), plan.Partitions[1].Clusters)
	assert.Equal(t, names(189, 250), plan.Partitions[3].Clusters)
	assert.Equal(t, 250, plan.MaxUnavailable)
}

// fleetClusters are clusters to partition by hand:
//
//	name     labels               groups (labels)
//	dev-1    env=dev              dev (tier=low)
//	dev-2    env=dev              dev (tier=low)
//	edge-1   env=prod, edge=true  edge (tier=high)
//	prod-1   env=prod             prod (tier=high)
//	prod-2   env=prod             prod (tier=high), eu (tier=high, region=eu)
//	stray    (none)               (none)
//	shown    display name canary  (none)
func fleetClusters() []fleetyaml.Cluster {
	low := map[string]string{"tier": "low"}
	high := map[string]string{"tier": "high"}
	return []fleetyaml.Cluster{
		{Name: "stray"},
		{Name: "prod-2", Labels: map[string]string{"env": "prod"}, Groups: []fleetyaml.Group{{Name: "prod", Labels: high}, {Name: "eu", Labels: map[string]string{"tier": "high", "region": "eu"}}}},
		{Name: "prod-1", Labels: map[string]string{"env": "prod"}, Groups: []fleetyaml.Group{{Name: "prod", Labels: high}}},
		{Name: "edge-1", Labels: map[string]string{"env": "prod", "edge": "true"}, Groups: []fleetyaml.Group{{Name: "edge", Labels: high}}},
		{Name: "dev-2", Labels: map[string]string{"env": "dev"}, Groups: []fleetyaml.Group{{Name: "dev", Labels: low}}},
		{Name: "dev-1", Labels: map[string]string{"env": "dev"}, Groups: []fleetyaml.Group{{Name: "dev", Labels: low}}},
		{Name: "shown", Labels: map[string]string{target.DisplayNameLabel: "canary"}},
	}
}

func TestComputeManualPartitions(t *testing.T) {
	sel := func(kv ...string) *metav1.LabelSelector {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &metav1.LabelSelector{MatchLabels: m}
	}
	tests := []struct {
		name       string
		partitions []fleetyaml.Partition
		want       []strategy.Partition
	}{
		{"by cluster name", []fleetyaml.Partition{{Name: "first", ClusterName: "dev-2"}},
			[]strategy.Partition{
				{Name: "first", MaxUnavailable: 1, Clusters: []string{"dev-2"}},
				{Name: "unpartitioned", MaxUnavailable: 6, Clusters: []string{"dev-1", "edge-1", "prod-1", "prod-2", "shown", "stray"}},
			}},
		{"by display name", []fleetyaml.Partition{{Name: "canary", ClusterName: "canary"}},
			[]strategy.Partition{
				{Name: "canary", MaxUnavailable: 1, Clusters: []string{"shown"}},
				{Name: "unpartitioned", MaxUnavailable: 6, Clusters: []string{"dev-1", "dev-2", "edge-1", "prod-1", "prod-2", "stray"}},
			}},
		{"by cluster selector", []fleetyaml.Partition{{Name: "dev", ClusterSelector: sel("env", "dev")}, {Name: "prod", ClusterSelector: sel("env", "prod")}},
			[]strategy.Partition{
				{Name: "dev", MaxUnavailable: 2, Clusters: []string{"dev-1", "dev-2"}},
				{Name: "prod", MaxUnavailable: 3, Clusters: []string{"edge-1", "prod-1", "prod-2"}},
				{Name: "unpartitioned", MaxUnavailable: 2, Clusters: []string{"shown", "stray"}},
			}},
		{"by cluster group", []fleetyaml.Partition{{Name: "eu", ClusterGroup: "eu"}, {Name: "prod", ClusterGroup: "prod"}},
			[]strategy.Partition{
				{Name: "eu", MaxUnavailable: 1, Clusters: []string{"prod-2"}},
				{Name: "prod", MaxUnavailable: 1, Clusters: []string{"prod-1"}},
				{Name: "unpartitioned", MaxUnavailable: 5, Clusters: []string{"dev-1", "dev-2", "edge-1", "shown", "stray"}},
			}},
		{"by cluster group selector", []fleetyaml.Partition{{Name: "high", ClusterGroupSelector: sel("tier", "high")}, {Name: "low", ClusterGroupSelector: sel("tier", "low")}},
			[]strategy.Partition{
				{Name: "high", MaxUnavailable: 3, Clusters: []string{"edge-1", "prod-1", "prod-2"}},
				{Name: "low", MaxUnavailable: 2, Clusters: []string{"dev-1", "dev-2"}},
				{Name: "unpartitioned", MaxUnavailable: 2, Clusters: []string{"shown", "stray"}},
			}},
		{"criteria are AND-ed", []fleetyaml.Partition{{Name: "edge", ClusterGroupSelector: sel("tier", "high"), ClusterSelector: sel("edge", "true")}},
			[]strategy.Partition{
				{Name: "edge", MaxUnavailable: 1, Clusters: []string{"edge-1"}},
				{Name: "unpartitioned", MaxUnavailable: 6, Clusters: []string{"dev-1", "dev-2", "prod-1", "prod-2", "shown", "stray"}},
			}},
		{"first match wins", []fleetyaml.Partition{{Name: "canary", ClusterName: "prod-1"}, {Name: "prod", ClusterSelector: sel("env", "prod")}, {Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
			[]strategy.Partition{
				{Name: "canary", MaxUnavailable: 1, Clusters: []string{"prod-1"}},
				{Name: "prod", MaxUnavailable: 2, Clusters: []string{"edge-1", "prod-2"}},
				{Name: "all", MaxUnavailable: 4, Clusters: []string{"dev-1", "dev-2", "shown", "stray"}},
			}},
		{"empty partitions are kept in order", []fleetyaml.Partition{{Name: "none", ClusterName: "missing"}, {Name: "no-criteria"}, {Name: "dev", ClusterGroup: "dev"}},
			[]strategy.Partition{
				{Name: "none", MaxUnavailable: 1, Clusters: []string{}},
				{Name: "no-criteria", MaxUnavailable: 1, Clusters: []string{}},
				{Name: "dev", MaxUnavailable: 2, Clusters: []string{"dev-1", "dev-2"}},
				{Name: "unpartitioned", MaxUnavailable: 5, Clusters: []string{"edge-1", "prod-1", "prod-2", "shown", "stray"}},
			}},
		{"unnamed partitions", []fleetyaml.Partition{{ClusterGroup: "dev"}, {Name: "prod", ClusterGroup: "prod"}, {ClusterName: "stray"}},
			[]strategy.Partition{
				{Name: "partition-0", MaxUnavailable: 2, Clusters: []string{"dev-1", "dev-2"}},
				{Name: "prod", MaxUnavailable: 2, Clusters: []string{"prod-1", "prod-2"}},
				{Name: "partition-2", MaxUnavailable: 1, Clusters: []string{"stray"}},
				{Name: "unpartitioned", MaxUnavailable: 2, Clusters: []string{"edge-1", "shown"}},
			}},
		{"no leftovers: no unpartitioned partition", []fleetyaml.Partition{{Name: "everything", ClusterSelector: &metav1.LabelSelector{}}},
			[]strategy.Partition{
				{Name: "everything", MaxUnavailable: 7, Clusters: []string{"dev-1", "dev-2", "edge-1", "prod-1", "prod-2", "shown", "stray"}},
			}},
		{"approval and own limits", []fleetyaml.Partition{
			{Name: "canary", ClusterName: "prod-1", RequireApproval: true},
			{Name: "prod", ClusterSelector: sel("env", "prod"), MaxUnavailable: pct("50%"), RequireApproval: true},
			{Name: "dev", ClusterGroup: "dev", MaxUnavailable: num(0)},
		},
			[]strategy.Partition{
				{Name: "canary", MaxUnavailable: 1, RequireApproval: true, Clusters: []string{"prod-1"}},
				{Name: "prod", MaxUnavailable: 1, RequireApproval: true, Clusters: []string{"edge-1", "prod-2"}},
				{Name: "dev", MaxUnavailable: 1, Clusters: []string{"dev-1", "dev-2"}},
				{Name: "unpartitioned", MaxUnavailable: 2, Clusters: []string{"shown", "stray"}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := strategy.Compute(&fleetyaml.RolloutStrategy{Partitions: tt.partitions}, fleetClusters())
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan.Partitions)
			assert.Equal(t, 7, plan.MaxUnavailable)
		})
	}
}

func TestComputeManualPartitionLimits(t *testing.T) {
	// The strategy's maxUnavailable applies to the bundle, and is the
	// default of each partition, scaled to the partition's size.
	rs := &fleetyaml.RolloutStrategy{
		MaxUnavailable: pct("40%"),
		Partitions: []fleetyaml.Partition{
			{Name: "dev", ClusterGroup: "dev"}, // 40% of 2 = 0.8 → 1
			{Name: "high", ClusterGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "high"}}}, // 40% of 3 = 1.2 → 2
			{Name: "fixed", ClusterName: "stray", MaxUnavailable: num(5)},                                               // its own count
		},
	}
	plan, err := strategy.Compute(rs, fleetClusters())
	require.NoError(t, err)
	assert.Equal(t, 3, plan.MaxUnavailable, "40% of 7 = 2.8 → 3")
	assert.Equal(t, []partitionShape{{"dev", 2, 1}, {"high", 3, 2}, {"fixed", 1, 5}, {"unpartitioned", 1, 1}}, shapes(plan.Partitions))

	// An empty clusterGroupSelector selects every cluster, grouped or not.
	rs = &fleetyaml.RolloutStrategy{Partitions: []fleetyaml.Partition{
		{Name: "dev", ClusterGroup: "dev"},
		{Name: "rest", ClusterGroupSelector: &metav1.LabelSelector{}},
	}}
	plan, err = strategy.Compute(rs, fleetClusters())
	require.NoError(t, err)
	assert.Equal(t, []partitionShape{{"dev", 2, 2}, {"rest", 5, 5}}, shapes(plan.Partitions))
}

func TestComputeLimits(t *testing.T) {
	tests := []struct {
		name     string
		rs       *fleetyaml.RolloutStrategy
		clusters int
		// want* are MaxUnavailable, MaxUnavailablePartitions and
		// FailureThreshold.
		wantMU, wantMUP, wantFT int
	}{
		{"defaults", nil, 10, 10, 0, -1},
		{"count", &fleetyaml.RolloutStrategy{MaxUnavailable: num(4)}, 10, 4, 0, -1},
		{"count above the cluster count", &fleetyaml.RolloutStrategy{MaxUnavailable: num(40)}, 10, 40, 0, -1},
		{"percentage rounds up", &fleetyaml.RolloutStrategy{MaxUnavailable: pct("10%")}, 11, 2, 0, -1},
		{"small percentage is at least 1", &fleetyaml.RolloutStrategy{MaxUnavailable: pct("10%")}, 5, 1, 0, -1},
		{"0% is 1", &fleetyaml.RolloutStrategy{MaxUnavailable: pct("0%")}, 10, 1, 0, -1},
		{"0 is 1", &fleetyaml.RolloutStrategy{MaxUnavailable: num(0)}, 10, 1, 0, -1},
		{"exact percentage", &fleetyaml.RolloutStrategy{MaxUnavailable: pct("50%")}, 10, 5, 0, -1},
		// Three partitions: canary, prod, unpartitioned.
		{"partitions count", &fleetyaml.RolloutStrategy{MaxUnavailablePartitions: num(2), Partitions: twoPartitions}, 10, 10, 2, -1},
		{"partitions 0", &fleetyaml.RolloutStrategy{MaxUnavailablePartitions: num(0), Partitions: twoPartitions}, 10, 10, 0, -1},
		{"partitions percentage rounds up", &fleetyaml.RolloutStrategy{MaxUnavailablePartitions: pct("50%"), Partitions: twoPartitions}, 10, 10, 2, -1},
		{"partitions percentage may be 0", &fleetyaml.RolloutStrategy{MaxUnavailablePartitions: pct("0%"), Partitions: twoPartitions}, 10, 10, 0, -1},
		{"failure threshold 0", &fleetyaml.RolloutStrategy{FailureThreshold: num(0)}, 10, 10, 0, 0},
		{"failure threshold count", &fleetyaml.RolloutStrategy{FailureThreshold: num(3)}, 10, 10, 0, 3},
		{"failure threshold percentage rounds up", &fleetyaml.RolloutStrategy{FailureThreshold: pct("10%")}, 25, 25, 0, 3},
		{"failure threshold 0%", &fleetyaml.RolloutStrategy{FailureThreshold: pct("0%")}, 25, 25, 0, 0},
		{"failure threshold 100%", &fleetyaml.RolloutStrategy{FailureThreshold: pct("100%")}, 25, 25, 0, 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := strategy.Compute(tt.rs, numbered(tt.clusters))
			require.NoError(t, err)
			assert.Equal(t, tt.wantMU, plan.MaxUnavailable, "maxUnavailable")
			assert.Equal(t, tt.wantMUP, plan.MaxUnavailablePartitions, "maxUnavailablePartitions")
			assert.Equal(t, tt.wantFT, plan.FailureThreshold, "failureThreshold")
		})
	}
}

// twoPartitions leave clusters c002 and up unpartitioned.
var twoPartitions = []fleetyaml.Partition{{Name: "canary", ClusterName: "c000"}, {Name: "next", ClusterName: "c001"}}

func TestComputeFailureSettings(t *testing.T) {
	plan, err := strategy.Compute(&fleetyaml.RolloutStrategy{RollbackOnFailure: true, ReadyTimeoutSeconds: ptr(45), FailureThreshold: num(1)}, numbered(3))
	require.NoError(t, err)
	assert.True(t, plan.RollbackOnFailure)
	assert.Equal(t, 45*time.Second, plan.ReadyTimeout)
	assert.Equal(t, 1, plan.FailureThreshold)
}

func TestComputeIsDeterministic(t *testing.T) {
	rs := &fleetyaml.RolloutStrategy{Partitions: []fleetyaml.Partition{
		{Name: "high", ClusterGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "high"}}},
		{Name: "dev", ClusterGroup: "dev"},
	}}
	cs := fleetClusters()
	want, err := strategy.Compute(rs, cs)
	require.NoError(t, err)
	for i := range 20 {
		// Rotate the input: the order of clusters must not matter.
		shuffled := append(slices.Clone(cs[i%len(cs):]), cs[:i%len(cs)]...)
		got, err := strategy.Compute(rs, shuffled)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	assert.Equal(t, "stray", cs[0].Name, "the caller's slice is not reordered")

	// The plan survives JSON, as it must to travel through workflow
	// history.
	js, err := json.Marshal(want)
	require.NoError(t, err)
	var back strategy.Plan
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, want, back)
}

func TestComputeErrors(t *testing.T) {
	tests := []struct {
		name     string
		rs       *fleetyaml.RolloutStrategy
		clusters []fleetyaml.Cluster
		want     string
	}{
		{"bad maxUnavailable", &fleetyaml.RolloutStrategy{MaxUnavailable: pct("ten")}, named("a"),
			`rolloutStrategy.maxUnavailable: "ten" must be a count or a percentage`},
		{"negative maxUnavailable", &fleetyaml.RolloutStrategy{MaxUnavailable: num(-1)}, named("a"),
			"rolloutStrategy.maxUnavailable: -1 is negative"},
		{"bad maxUnavailablePartitions", &fleetyaml.RolloutStrategy{MaxUnavailablePartitions: pct("1/2")}, named("a"),
			"rolloutStrategy.maxUnavailablePartitions:"},
		{"bad autoPartitionSize", &fleetyaml.RolloutStrategy{AutoPartitionSize: pct("x%"), AutoPartitionThreshold: ptr(1)}, named("a"),
			"rolloutStrategy.autoPartitionSize:"},
		{"bad failureThreshold", &fleetyaml.RolloutStrategy{FailureThreshold: pct("some")}, named("a"),
			"rolloutStrategy.failureThreshold:"},
		{"negative failureThreshold", &fleetyaml.RolloutStrategy{FailureThreshold: pct("-10%")}, named("a"),
			"rolloutStrategy.failureThreshold: -10% is negative"},
		{"bad partition maxUnavailable", &fleetyaml.RolloutStrategy{Partitions: []fleetyaml.Partition{{ClusterName: "a"}, {ClusterName: "b", MaxUnavailable: pct("half")}}}, named("a", "b"),
			"rolloutStrategy.partitions[1].maxUnavailable:"},
		{"bad partition selector", &fleetyaml.RolloutStrategy{Partitions: []fleetyaml.Partition{{Name: "p", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}}}, nil,
			"rolloutStrategy.partitions[0]: target p: clusterSelector"},
		{"duplicate partition names", &fleetyaml.RolloutStrategy{Partitions: []fleetyaml.Partition{{Name: "p", ClusterName: "a"}, {Name: "p", ClusterName: "b"}}}, named("a"),
			`rolloutStrategy.partitions[1].name: "p" is also the name of partitions[0]`},
		{"reserved partition name", &fleetyaml.RolloutStrategy{Partitions: []fleetyaml.Partition{{Name: "unpartitioned", ClusterName: "a"}}}, named("a"),
			"rolloutStrategy.partitions[0].name:"},
		{"zero ready timeout", &fleetyaml.RolloutStrategy{ReadyTimeoutSeconds: ptr(0)}, named("a"),
			"rolloutStrategy.readyTimeoutSeconds: 0 must be positive"},
		{"cluster twice", nil, named("a", "b", "a"), "cluster a is given twice"},
		{"cluster without name", nil, named("a", ""), "a cluster has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := strategy.Compute(tt.rs, tt.clusters)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
