package target

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func TestMissing(t *testing.T) {
	known := NewKnown([]Cluster{{Name: "c1"}, {Name: "c-0a1b", Labels: map[string]string{DisplayNameLabel: "edge-1"}}},
		[]Group{{Name: "prod"}})
	for _, tc := range []struct {
		name    string
		targets []api.TargetSelector
		want    []string
	}{
		{"all found", []api.TargetSelector{{ClusterGroup: "prod"}, {ClusterName: "c1"}, {ClusterName: "edge-1"}}, nil},
		{"a group typo", []api.TargetSelector{{ClusterGroup: "prd"}}, []string{`clusterGroup "prd" not found`}},
		{"a cluster typo, twice", []api.TargetSelector{{ClusterName: "c2"}, {Name: "again", ClusterName: "c2"}},
			[]string{`cluster "c2" not found`}},
		{"selectors name nothing", []api.TargetSelector{{ClusterSelector: nil}}, nil},
		{"both, sorted", []api.TargetSelector{{ClusterName: "zz", ClusterGroup: "aa"}},
			[]string{`cluster "zz" not found`, `clusterGroup "aa" not found`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Compile(fleetyaml.Bundle{Name: "b"}, tc.targets).Missing(known))
		})
	}
}
