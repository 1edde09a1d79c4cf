package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// sampleMap renders samples as "name{label,...}" → value.
func sampleMap(t *testing.T, samples []stateSample) map[string]float64 {
	names := map[*prometheus.Desc]string{
		gitRepoDeploymentsDesc: "flotilla_gitrepo_bundledeployments",
		bundleDeploymentsDesc:  "flotilla_bundle_bundledeployments",
		gitRepoResourcesDesc:   "flotilla_gitrepo_resources",
		clusterStateDesc:       "flotilla_cluster_state",
	}
	out := map[string]float64{}
	for _, s := range samples {
		key := names[s.desc] + "{" + strings.Join(s.labels, ",") + "}"
		_, dup := out[key]
		require.False(t, dup, "sample %s twice", key)
		out[key] = s.value
	}
	return out
}

func dep(bundle, cluster string, st status.State) status.Deployment {
	return status.Deployment{Bundle: bundle, Cluster: cluster, State: st}
}

func TestStateSamples(t *testing.T) {
	shop := status.GitRepo{Namespace: "fleet-default", Name: "shop", Deployments: []status.Deployment{
		dep("app", "c1", status.Ready), dep("app", "c2", status.Modified), dep("db", "c1", status.ErrApplied),
		dep("db", "c2", status.Ready),
	}, ResourceCounts: status.ResourceCounts{Ready: 5, DesiredReady: 9, NotReady: 1, Missing: 1, Modified: 2, Orphaned: 3,
		WaitApplied: 0, Unknown: 0}}
	blog := status.GitRepo{Namespace: "team", Name: "blog", Deployments: []status.Deployment{
		dep("web", "c2", status.WaitApplied), dep("web", "c3", status.Ready),
	}}
	empty := status.GitRepo{Namespace: "team", Name: "empty"}

	tests := []struct {
		name  string
		repos []status.GitRepo
		want  map[string]float64 // a subset of the samples
		count int                // how many samples in all
	}{
		{name: "nothing", count: 0},
		{name: "a GitRepo without deployments still has zero counts", repos: []status.GitRepo{empty},
			want: map[string]float64{
				"flotilla_gitrepo_bundledeployments{team,empty,Ready}":   0,
				"flotilla_gitrepo_bundledeployments{team,empty,Pending}": 0,
				"flotilla_gitrepo_resources{team,empty,desiredReady}":    0,
			}, count: 7 + 8},
		{name: "deployments, bundles, resources and clusters of one GitRepo", repos: []status.GitRepo{shop},
			want: map[string]float64{
				"flotilla_gitrepo_bundledeployments{fleet-default,shop,Ready}":        2,
				"flotilla_gitrepo_bundledeployments{fleet-default,shop,Modified}":     1,
				"flotilla_gitrepo_bundledeployments{fleet-default,shop,ErrApplied}":   1,
				"flotilla_gitrepo_bundledeployments{fleet-default,shop,NotReady}":     0,
				"flotilla_bundle_bundledeployments{fleet-default,shop,app,Ready}":     1,
				"flotilla_bundle_bundledeployments{fleet-default,shop,app,Modified}":  1,
				"flotilla_bundle_bundledeployments{fleet-default,shop,app,Pending}":   0,
				"flotilla_bundle_bundledeployments{fleet-default,shop,db,ErrApplied}": 1,
				"flotilla_bundle_bundledeployments{fleet-default,shop,db,Ready}":      1,
				"flotilla_bundle_bundledeployments{fleet-default,shop,db,Modified}":   0,
				"flotilla_gitrepo_resources{fleet-default,shop,ready}":                5,
				"flotilla_gitrepo_resources{fleet-default,shop,notReady}":             1,
				"flotilla_gitrepo_resources{fleet-default,shop,missing}":              1,
				"flotilla_gitrepo_resources{fleet-default,shop,modified}":             2,
				"flotilla_gitrepo_resources{fleet-default,shop,orphaned}":             3,
				"flotilla_gitrepo_resources{fleet-default,shop,waitApplied}":          0,
				"flotilla_gitrepo_resources{fleet-default,shop,unknown}":              0,
				"flotilla_gitrepo_resources{fleet-default,shop,desiredReady}":         9,
				"flotilla_cluster_state{c1,ErrApplied}":                               1,
				"flotilla_cluster_state{c1,Ready}":                                    0,
				"flotilla_cluster_state{c2,Modified}":                                 1,
				"flotilla_cluster_state{c2,Ready}":                                    0,
			}, count: 7 + 2*7 + 8 + 2*7},
		{name: "a cluster's state is its worst over every GitRepo", repos: []status.GitRepo{shop, blog},
			want: map[string]float64{
				"flotilla_cluster_state{c1,ErrApplied}":                        1,
				"flotilla_cluster_state{c2,WaitApplied}":                       1,
				"flotilla_cluster_state{c2,Modified}":                          0,
				"flotilla_cluster_state{c3,Ready}":                             1,
				"flotilla_cluster_state{c3,NotReady}":                          0,
				"flotilla_gitrepo_bundledeployments{team,blog,WaitApplied}":    1,
				"flotilla_bundle_bundledeployments{team,blog,web,WaitApplied}": 1,
				"flotilla_bundle_bundledeployments{team,blog,web,Ready}":       1,
			}, count: (7 + 2*7 + 8) + (7 + 7 + 8) + 3*7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sampleMap(t, stateSamples(tt.repos))
			assert.Len(t, got, tt.count)
			for k, v := range tt.want {
				if assert.Contains(t, got, k) {
					assert.Equal(t, v, got[k], k)
				}
			}
			for k, v := range got {
				if strings.HasPrefix(k, "flotilla_cluster_state{") {
					assert.Contains(t, []float64{0, 1}, v, k)
				}
			}
		})
	}
}

func TestStateSamples_OneStatePerCluster(t *testing.T) {
	repos := []status.GitRepo{{Namespace: "n", Name: "a", Deployments: []status.Deployment{
		dep("x", "c1", status.Ready), dep("y", "c1", status.NotReady), dep("z", "c1", status.Pending)}}}
	ones := 0
	for k, v := range sampleMap(t, stateSamples(repos)) {
		if strings.HasPrefix(k, "flotilla_cluster_state{") && v == 1 {
			ones++
			assert.Equal(t, "flotilla_cluster_state{c1,Pending}", k, "Pending outranks NotReady and Ready")
		}
	}
	assert.Equal(t, 1, ones)
}

// fakeReads serves the collector a fixed list and counts the reads.
type fakeReads struct {
	mu     sync.Mutex
	reads  int
	repos  []status.GitRepo
	failed int
}

func (f *fakeReads) read(context.Context) ([]status.GitRepo, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.repos, f.failed
}

func TestStateCollector_CachesReadsAndCountsErrors(t *testing.T) {
	fake := &fakeReads{repos: []status.GitRepo{{Namespace: "n", Name: "a",
		Deployments: []status.Deployment{dep("x", "c1", status.Ready)}}}, failed: 2}
	c := newStateCollector(fake.read)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))

	gather := func() {
		_, err := reg.Gather()
		require.NoError(t, err)
	}
	gather()
	gather()
	assert.Equal(t, 1, fake.reads, "a scrape within 10s is served from the cache")
	assert.Equal(t, 2.0, testutil.ToFloat64(c.errors))

	now = now.Add(9 * time.Second)
	gather()
	assert.Equal(t, 1, fake.reads)

	now = now.Add(time.Second)
	fake.repos = nil
	gather()
	assert.Equal(t, 2, fake.reads, "10s after the last read, a scrape reads again")
	assert.Equal(t, 4.0, testutil.ToFloat64(c.errors))
	n, err := testutil.GatherAndCount(reg, "flotilla_gitrepo_bundledeployments", "flotilla_cluster_state")
	require.NoError(t, err)
	assert.Zero(t, n, "a GitRepo no longer running is gone from the metrics")
}

func TestStateCollector_Exposition(t *testing.T) {
	fake := &fakeReads{repos: []status.GitRepo{{Namespace: "n", Name: "a",
		Deployments:    []status.Deployment{dep("x", "c1", status.Modified)},
		ResourceCounts: status.ResourceCounts{DesiredReady: 2, Ready: 1, Modified: 1}}}}
	c := newStateCollector(fake.read)
	want := `
# HELP flotilla_cluster_state 1 for the worst state of a cluster's bundle deployments over all GitRepos, 0 for the other states.
# TYPE flotilla_cluster_state gauge
flotilla_cluster_state{cluster="c1",state="ErrApplied"} 0
flotilla_cluster_state{cluster="c1",state="Modified"} 1
flotilla_cluster_state{cluster="c1",state="NotReady"} 0
flotilla_cluster_state{cluster="c1",state="OutOfSync"} 0
flotilla_cluster_state{cluster="c1",state="Pending"} 0
flotilla_cluster_state{cluster="c1",state="Ready"} 0
flotilla_cluster_state{cluster="c1",state="WaitApplied"} 0
# HELP flotilla_gitrepo_resources Objects of a GitRepo's deployments, by state (desiredReady: all of them).
# TYPE flotilla_gitrepo_resources gauge
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="desiredReady"} 2
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="missing"} 0
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="modified"} 1
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="notReady"} 0
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="orphaned"} 0
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="ready"} 1
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="unknown"} 0
flotilla_gitrepo_resources{gitrepo="a",namespace="n",state="waitApplied"} 0
# HELP flotilla_gitrepo_scrape_errors_total GitRepos whose status could not be read for the state metrics, and failed listings of them.
# TYPE flotilla_gitrepo_scrape_errors_total counter
flotilla_gitrepo_scrape_errors_total 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"flotilla_cluster_state", "flotilla_gitrepo_resources", "flotilla_gitrepo_scrape_errors_total"))
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// jsonValue is a query result that decodes like the Temporal data
// converter's JSON payloads.
type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return j.v != nil }

func (j jsonValue) Get(ptr any) error {
	b, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func listing(ids ...string) *workflowservice.ListWorkflowExecutionsResponse {
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, id := range ids {
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run"}})
	}
	return resp
}

func TestReadGitRepos(t *testing.T) {
	c := mocks.NewClient(t)
	wantQuery := "(WorkflowType = 'GitRepoWorkflow' OR WorkflowType = 'HelmOpWorkflow') AND ExecutionStatus = 'Running'"
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return r.GetQuery() == wantQuery
	})).Return(listing(protocol.GitRepoID("n", "a"), protocol.GitRepoID("n", "broken"), protocol.GitRepoID("n", "b")), nil).Once()
	for _, name := range []string{"a", "b"} {
		st := status.GitRepo{Namespace: "n", Name: name, Deployments: []status.Deployment{
			{Bundle: "x", Cluster: "c1", State: status.Ready, Resources: 2, ReadyResources: 2}}}
		c.On("QueryWorkflow", mock.Anything, protocol.GitRepoID("n", name), "", protocol.QueryStatus).
			Return(jsonValue{st}, nil).Once()
	}
	c.On("QueryWorkflow", mock.Anything, protocol.GitRepoID("n", "broken"), "", protocol.QueryStatus).
		Return(nil, errors.New("deadline exceeded")).Once()

	repos, failed := readGitRepos(c, zap.NewNop())(context.Background())
	assert.Equal(t, 1, failed)
	require.Len(t, repos, 2)
	assert.Equal(t, []string{"a", "b"}, []string{repos[0].Name, repos[1].Name}, "in the listing's order")
	assert.Equal(t, 2, repos[0].ResourceCounts.Ready, "a status without derived fields is finished")
}

func TestReadGitRepos_ListFails(t *testing.T) {
	c := mocks.NewClient(t)
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(nil, fmt.Errorf("visibility unavailable")).Once()
	repos, failed := readGitRepos(c, zap.NewNop())(context.Background())
	assert.Empty(t, repos)
	assert.Equal(t, 1, failed)
}

func TestReadGitRepos_QueriesHaveADeadline(t *testing.T) {
	c := mocks.NewClient(t)
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(listing("gitrepo/n/a"), nil).Once()
	c.On("QueryWorkflow", mock.MatchedBy(func(ctx context.Context) bool {
		dl, ok := ctx.Deadline()
		return ok && time.Until(dl) <= stateQueryTimeout
	}), "gitrepo/n/a", "", protocol.QueryStatus).Return(jsonValue{status.GitRepo{Name: "a"}}, nil).Once()
	repos, failed := readGitRepos(c, zap.NewNop())(context.Background())
	assert.Zero(t, failed)
	assert.Len(t, repos, 1)
}
