package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func TestMatch(t *testing.T) {
	clusters := []Cluster{
		{Name: "prod-eu", Labels: map[string]string{"env": "prod", "region": "eu"}},
		{Name: "dev", Labels: map[string]string{"env": "dev", DisplayNameLabel: "Dev Cluster"}},
		{Name: "prod-us", Labels: map[string]string{"env": "prod", "region": "us"}},
		{Name: "lonely"},
	}
	groups := []Group{
		{Name: "prod", Selector: sel("env", "prod"), Labels: map[string]string{"tier": "critical"}},
		{Name: "eu", Selector: sel("region", "eu"), Labels: map[string]string{"geo": "europe"}},
		{Name: "all", Selector: &metav1.LabelSelector{}},
		{Name: "none"}, // nil selector: selects no cluster
	}
	tests := []struct {
		name     string
		targets  []api.TargetSelector
		clusters []Cluster // nil: the shared clusters above
		want     []Matched
		wantErr  string // substring of the error; empty: no error
	}{
		{
			name:    "no targets",
			targets: nil,
		},
		{
			name:    "target without criteria matches nothing",
			targets: []api.TargetSelector{{Name: "empty"}},
		},
		{
			name:    "empty cluster selector matches every cluster",
			targets: []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{}}},
			want: []Matched{
				{Cluster: "dev", Target: "target[0]"}, {Cluster: "lonely", Target: "target[0]"},
				{Cluster: "prod-eu", Target: "target[0]"}, {Cluster: "prod-us", Target: "target[0]"},
			},
		},
		{
			name:    "cluster selector with labels",
			targets: []api.TargetSelector{{Name: "prod", ClusterSelector: sel("env", "prod")}},
			want:    []Matched{{Cluster: "prod-eu", Target: "prod"}, {Cluster: "prod-us", Target: "prod"}},
		},
		{
			name: "cluster selector with expressions",
			targets: []api.TargetSelector{{Name: "no-region", ClusterSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpDoesNotExist}},
			}}},
			want: []Matched{{Cluster: "dev", Target: "no-region"}, {Cluster: "lonely", Target: "no-region"}},
		},
		{
			name:    "cluster name",
			targets: []api.TargetSelector{{Name: "one", ClusterName: "prod-us"}},
			want:    []Matched{{Cluster: "prod-us", Target: "one"}},
		},
		{
			name:    "cluster name matches the display-name label",
			targets: []api.TargetSelector{{Name: "display", ClusterName: "Dev Cluster"}},
			want:    []Matched{{Cluster: "dev", Target: "display"}},
		},
		{
			name:    "unknown cluster name matches nothing",
			targets: []api.TargetSelector{{ClusterName: "nope"}},
		},
		{
			name:    "criteria are AND-ed: name and selector agree",
			targets: []api.TargetSelector{{Name: "t", ClusterName: "prod-eu", ClusterSelector: sel("region", "eu")}},
			want:    []Matched{{Cluster: "prod-eu", Target: "t"}},
		},
		{
			name:    "criteria are AND-ed: name and selector disagree",
			targets: []api.TargetSelector{{Name: "t", ClusterName: "prod-eu", ClusterSelector: sel("region", "us")}},
		},
		{
			name:    "cluster group",
			targets: []api.TargetSelector{{Name: "g", ClusterGroup: "eu"}},
			want:    []Matched{{Cluster: "prod-eu", Target: "g"}},
		},
		{
			name:    "cluster group with empty selector holds every cluster",
			targets: []api.TargetSelector{{Name: "g", ClusterGroup: "all"}},
			want: []Matched{
				{Cluster: "dev", Target: "g"}, {Cluster: "lonely", Target: "g"},
				{Cluster: "prod-eu", Target: "g"}, {Cluster: "prod-us", Target: "g"},
			},
		},
		{
			name:    "group with nil selector has no members",
			targets: []api.TargetSelector{{Name: "g", ClusterGroup: "none"}},
		},
		{
			name:    "missing group matches nothing",
			targets: []api.TargetSelector{{Name: "g", ClusterGroup: "ghost"}},
		},
		{
			name:    "cluster group AND cluster selector",
			targets: []api.TargetSelector{{Name: "g", ClusterGroup: "prod", ClusterSelector: sel("region", "us")}},
			want:    []Matched{{Cluster: "prod-us", Target: "g"}},
		},
		{
			name:    "cluster group selector matches group labels",
			targets: []api.TargetSelector{{Name: "gs", ClusterGroupSelector: sel("tier", "critical")}},
			want:    []Matched{{Cluster: "prod-eu", Target: "gs"}, {Cluster: "prod-us", Target: "gs"}},
		},
		{
			name:    "cluster group selector does not match cluster labels",
			targets: []api.TargetSelector{{Name: "gs", ClusterGroupSelector: sel("env", "prod")}},
		},
		{
			name: "group name and group selector must hold for the same group",
			// prod-eu is in "prod" (tier=critical) and "eu" (geo=europe), but
			// no single group is named eu and labelled tier=critical.
			targets: []api.TargetSelector{{Name: "same", ClusterGroup: "eu", ClusterGroupSelector: sel("tier", "critical")}},
		},
		{
			name:    "group name and group selector on the same group",
			targets: []api.TargetSelector{{Name: "same", ClusterGroup: "eu", ClusterGroupSelector: sel("geo", "europe")}},
			want:    []Matched{{Cluster: "prod-eu", Target: "same"}},
		},
		{
			name: "empty group selector matches a cluster in no group (Fleet)",
			clusters: []Cluster{
				{Name: "grouped", Labels: map[string]string{"env": "prod"}},
				{Name: "ungrouped", Labels: map[string]string{"env": "qa"}},
			},
			targets: []api.TargetSelector{{Name: "any", ClusterGroupSelector: &metav1.LabelSelector{}}},
			want:    []Matched{{Cluster: "grouped", Target: "any"}, {Cluster: "ungrouped", Target: "any"}},
		},
		{
			name: "first matching target wins",
			targets: []api.TargetSelector{
				{Name: "eu", ClusterSelector: sel("region", "eu")},
				{Name: "prod", ClusterSelector: sel("env", "prod")},
				{Name: "rest", ClusterSelector: &metav1.LabelSelector{}},
			},
			want: []Matched{
				{Cluster: "dev", Target: "rest"}, {Cluster: "lonely", Target: "rest"},
				{Cluster: "prod-eu", Target: "eu"}, {Cluster: "prod-us", Target: "prod"},
			},
		},
		{
			name:    "unnamed targets are named by index",
			targets: []api.TargetSelector{{Name: "x", ClusterName: "nope"}, {ClusterName: "dev"}},
			want:    []Matched{{Cluster: "dev", Target: "target[1]"}},
		},
		{
			name:     "default target selects the default group",
			targets:  api.GitRepoSpec{}.EffectiveTargets(),
			clusters: []Cluster{{Name: "local", Labels: map[string]string{"name": "local"}}, {Name: "other"}},
			want:     []Matched{{Cluster: "local", Target: "default"}},
		},
		{
			name: "invalid cluster selector names the target",
			targets: []api.TargetSelector{{Name: "bad", ClusterSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Sometimes"}},
			}}},
			wantErr: "target bad: clusterSelector",
		},
		{
			name: "invalid group selector names the unnamed target",
			targets: []api.TargetSelector{{ClusterName: "dev"}, {ClusterGroupSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}},
			}}},
			wantErr: "target target[1]: clusterGroupSelector",
		},
		{
			name:     "duplicate cluster",
			clusters: []Cluster{{Name: "a"}, {Name: "a"}},
			targets:  []api.TargetSelector{{ClusterName: "a"}},
			wantErr:  `cluster "a" is listed twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := clusters
			gs := groups
			if tt.clusters != nil {
				cs = tt.clusters
				gs = []Group{{Name: "default", Selector: sel("name", "local")}, {Name: "prod", Selector: sel("env", "prod")}}
			}
			got, err := Match(tt.targets, cs, gs)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMatch_InvalidGroupSelector(t *testing.T) {
	groups := []Group{{Name: "broken", Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpExists, Values: []string{"v"}}},
	}}}
	_, err := Match([]api.TargetSelector{{ClusterGroup: "broken"}}, []Cluster{{Name: "a"}}, groups)
	require.ErrorContains(t, err, "cluster group broken: selector")
}

func TestMatch_Deterministic(t *testing.T) {
	targets := []api.TargetSelector{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}
	a := []Cluster{{Name: "c"}, {Name: "a"}, {Name: "b"}}
	b := []Cluster{{Name: "b"}, {Name: "c"}, {Name: "a"}}
	ga, err := Match(targets, a, nil)
	require.NoError(t, err)
	gb, err := Match(targets, b, nil)
	require.NoError(t, err)
	assert.Equal(t, ga, gb)
	assert.Equal(t, []Matched{{"a", "all"}, {"b", "all"}, {"c", "all"}}, ga)
	assert.Equal(t, []Cluster{{Name: "c"}, {Name: "a"}, {Name: "b"}}, a, "input not reordered")
}

func TestMemberships(t *testing.T) {
	groups := []Group{
		{Name: "prod", Selector: sel("env", "prod"), Labels: map[string]string{"tier": "critical"}},
		{Name: "none"}, // nil selector: selects no cluster
		{Name: "all", Selector: &metav1.LabelSelector{}},
		{Name: "eu", Selector: sel("region", "eu")},
	}
	tests := []struct {
		name   string
		labels map[string]string
		groups []Group
		want   []fleetyaml.Group
	}{
		{"no groups", map[string]string{"env": "prod"}, nil, nil},
		{"in input order, with the group's labels", map[string]string{"env": "prod", "region": "eu"}, groups,
			[]fleetyaml.Group{{Name: "prod", Labels: map[string]string{"tier": "critical"}}, {Name: "all"}, {Name: "eu"}}},
		{"only the empty selector", nil, groups, []fleetyaml.Group{{Name: "all"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Memberships(tt.labels, tt.groups)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	bad := []Group{{Name: "broken", Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}}}
	_, err := Memberships(nil, bad)
	require.ErrorContains(t, err, "cluster group broken: selector: invalid label selector")
}
