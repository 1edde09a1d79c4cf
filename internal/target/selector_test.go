package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func TestMatches(t *testing.T) {
	dev := fleetyaml.Cluster{Name: "c1", Labels: map[string]string{"env": "dev", "region": "eu"}}
	display := fleetyaml.Cluster{Name: "c-xyz12", Labels: map[string]string{DisplayNameLabel: "shiny"}}
	inGroups := fleetyaml.Cluster{Name: "c2", Labels: map[string]string{"env": "prod"}, Groups: []fleetyaml.Group{
		{Name: "g1", Labels: map[string]string{"team": "a"}},
		{Name: "g2", Labels: map[string]string{"team": "b"}},
	}}
	tests := []struct {
		name string
		sel  api.TargetSelector
		c    fleetyaml.Cluster
		want bool
	}{
		{"clusterName", api.TargetSelector{ClusterName: "c1"}, dev, true},
		{"clusterName other", api.TargetSelector{ClusterName: "c9"}, dev, false},
		{"clusterName matches display name label", api.TargetSelector{ClusterName: "shiny"}, display, true},
		{"clusterName matches name with display label", api.TargetSelector{ClusterName: "c-xyz12"}, display, true},
		{"clusterSelector", api.TargetSelector{ClusterSelector: sel("env", "dev")}, dev, true},
		{"clusterSelector other", api.TargetSelector{ClusterSelector: sel("env", "prod")}, dev, false},
		{"clusterSelector {} matches all", api.TargetSelector{ClusterSelector: &metav1.LabelSelector{}}, display, true},
		{"no criteria matches nothing", api.TargetSelector{Name: "empty"}, dev, false},
		{"no criteria matches nothing in groups", api.TargetSelector{}, inGroups, false},
		{"clusterGroup member", api.TargetSelector{ClusterGroup: "g2"}, inGroups, true},
		{"clusterGroup not member", api.TargetSelector{ClusterGroup: "g3"}, inGroups, false},
		{"clusterGroup without groups", api.TargetSelector{ClusterGroup: "g1"}, dev, false},
		{"clusterGroupSelector", api.TargetSelector{ClusterGroupSelector: sel("team", "b")}, inGroups, true},
		{"clusterGroupSelector other", api.TargetSelector{ClusterGroupSelector: sel("team", "c")}, inGroups, false},
		{"clusterGroupSelector {} without groups", api.TargetSelector{ClusterGroupSelector: &metav1.LabelSelector{}}, dev, true},
		{"clusterGroupSelector does not see cluster labels", api.TargetSelector{ClusterGroupSelector: sel("env", "prod")}, inGroups, false},
		{"AND both match", api.TargetSelector{ClusterName: "c1", ClusterSelector: sel("region", "eu")}, dev, true},
		{"AND one fails", api.TargetSelector{ClusterName: "c1", ClusterSelector: sel("region", "us")}, dev, false},
		{"AND group and cluster labels", api.TargetSelector{ClusterGroup: "g1", ClusterSelector: sel("env", "prod")}, inGroups, true},
		// Criteria must hold for one and the same group.
		{"AND within one group", api.TargetSelector{ClusterGroup: "g1", ClusterGroupSelector: sel("team", "b")}, inGroups, false},
		{"AND within one group holds", api.TargetSelector{ClusterGroup: "g2", ClusterGroupSelector: sel("team", "b")}, inGroups, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Matches(tt.sel, tt.c)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMatchesInvalid(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}
	tests := []struct {
		name    string
		sel     api.TargetSelector
		wantErr string
	}{
		{"clusterSelector names the target", api.TargetSelector{Name: "prod", ClusterSelector: bad},
			"target prod: clusterSelector: invalid label selector"},
		{"clusterGroupSelector of an unnamed target", api.TargetSelector{ClusterGroupSelector: bad},
			"target (unnamed): clusterGroupSelector: invalid label selector"},
		// An invalid selector is an error even when another criterion
		// already rules the cluster out.
		{"other criterion fails first", api.TargetSelector{ClusterName: "elsewhere", ClusterSelector: bad},
			"clusterSelector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := Matches(tt.sel, fleetyaml.Cluster{Name: "c"})
			require.ErrorContains(t, err, tt.wantErr)
			assert.False(t, ok)
		})
	}
}
