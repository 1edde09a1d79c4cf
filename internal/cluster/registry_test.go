package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// fakeTemporal answers the three calls a Registry makes: visibility
// listings (a page per workflow, to exercise paging), status queries and
// signals. A real server cannot stand in here: answering a query needs a
// workflow, and internal/ may not import the workflow package (see
// .golangci.yml); the end-to-end tests in tests/ run the real thing.
// Other client methods panic.
type fakeTemporal struct {
	client.Client

	mu sync.Mutex
	// listed is what each visibility query lists.
	listed map[string][]string
	// hiddenFor is how many listings of a query list nothing, as while
	// visibility lags.
	hiddenFor map[string]int
	// records answer status queries by workflow ID; an ID without one has
	// ended (NotFound).
	records map[string]any
	// failQuery fails the query of a workflow ID.
	failQuery map[string]error
	lists     map[string]int
	signalled []string
	// running answers "WorkflowId IN (...)" listings: the IDs of the list
	// that are running, each after listed hiddenFor[id] times.
	running   map[string]bool
	inQueries int
	// signalGate, when set, holds the first signal until it is closed;
	// signalling is closed when that signal arrives.
	signalGate, signalling chan struct{}
}

func (f *fakeTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lists == nil {
		f.lists = map[string]int{}
	}
	f.lists[req.Query]++
	ids := f.listed[req.Query]
	if in, ok := strings.CutPrefix(req.Query, "WorkflowId IN ("); ok && len(req.NextPageToken) == 0 {
		f.inQueries++
		ids = nil
		in, _, _ = strings.Cut(in, ")")
		for _, q := range strings.Split(in, ", ") {
			id := strings.Trim(q, "'")
			f.lists[id]++
			if f.running[id] && f.lists[id] > f.hiddenFor[id] {
				ids = append(ids, id)
			}
		}
		if f.listed == nil {
			f.listed = map[string][]string{}
		}
		f.listed[req.Query] = ids // for the next pages
	}
	if f.lists[req.Query] <= f.hiddenFor[req.Query] || len(ids) == 0 {
		return &workflowservice.ListWorkflowExecutionsResponse{}, nil
	}
	page := 0
	if len(req.NextPageToken) > 0 {
		page, _ = strconv.Atoi(string(req.NextPageToken))
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
		{Execution: &commonpb.WorkflowExecution{WorkflowId: ids[page]}},
	}}
	if page+1 < len(ids) {
		resp.NextPageToken = []byte(strconv.Itoa(page + 1))
	}
	return resp, nil
}

func (f *fakeTemporal) QueryWorkflow(_ context.Context, id, _, queryType string, _ ...any) (converter.EncodedValue, error) {
	if queryType != protocol.QueryStatus {
		return nil, errors.New("unexpected query " + queryType)
	}
	if err := f.failQuery[id]; err != nil {
		return nil, err
	}
	rec, ok := f.records[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow " + id + " not found")
	}
	return jsonValue{rec}, nil
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, id, _, signal string, _ any) error {
	f.mu.Lock()
	if gate := f.signalGate; gate != nil {
		f.signalGate = nil
		close(f.signalling)
		f.mu.Unlock()
		<-gate
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	if signal != protocol.SignalClustersChanged {
		return errors.New("unexpected signal " + signal)
	}
	if _, ok := f.records[id]; !ok {
		return serviceerror.NewNotFound("workflow " + id + " not found")
	}
	f.signalled = append(f.signalled, id)
	return nil
}

// jsonValue is a query answer, decoded as the SDK's JSON converter would.
type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return j.v != nil }

func (j jsonValue) Get(ptr any) error {
	data, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, ptr)
}

func TestRegistry_List(t *testing.T) {
	clusters := temporalx.RunningOfType(protocol.ClusterWorkflow)
	groups := temporalx.RunningOfType(protocol.ClusterGroupWorkflow)
	f := &fakeTemporal{
		listed: map[string][]string{
			clusters: {"cluster/b", "cluster/a", "cluster/ended", "cluster/removed", "cluster/c"},
			groups:   {"group/prod", "group/dev"},
		},
		records: map[string]any{
			"cluster/a":       protocol.ClusterRecord{Name: "a", Labels: map[string]string{"env": "dev"}},
			"cluster/b":       protocol.ClusterRecord{Name: "b"},
			"cluster/c":       protocol.ClusterRecord{Name: "c", Paused: true},
			"cluster/removed": protocol.ClusterRecord{Name: "removed", Removed: true},
			"group/prod":      protocol.GroupRecord{Name: "prod"},
			"group/dev":       protocol.GroupRecord{Name: "dev"},
		},
	}
	gotClusters, gotGroups, err := NewRegistry(f).List(context.Background())
	require.NoError(t, err)
	var names []string
	for _, c := range gotClusters {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"a", "b", "c"}, names, "sorted; removed and ended clusters left out")
	assert.Equal(t, map[string]string{"env": "dev"}, gotClusters[0].Labels)
	assert.True(t, gotClusters[2].Paused)
	require.Len(t, gotGroups, 2)
	assert.Equal(t, "dev", gotGroups[0].Name)
	assert.Equal(t, "prod", gotGroups[1].Name)

	t.Run("a failed query fails the listing", func(t *testing.T) {
		f.failQuery = map[string]error{"cluster/b": serviceerror.NewUnavailable("down")}
		_, _, err := NewRegistry(f).List(context.Background())
		var unavailable *serviceerror.Unavailable
		require.ErrorAs(t, err, &unavailable)
		assert.ErrorContains(t, err, "query cluster/b")
	})
}

func TestRegistry_NotifyGitRepos(t *testing.T) {
	// HelmOps roll out as GitRepos do: they are told too.
	repos := temporalx.RunningOfTypes(protocol.GitRepoWorkflow, protocol.HelmOpWorkflow)
	f := &fakeTemporal{
		listed: map[string][]string{repos: {"gitrepo/ns/one", "gitrepo/ns/ended", "helmop/ns/web", "gitrepo/ns/two"}},
		records: map[string]any{
			"gitrepo/ns/one": struct{}{},
			"helmop/ns/web":  struct{}{},
			"gitrepo/ns/two": struct{}{},
		},
	}
	n, err := NewRegistry(f).NotifyGitRepos(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []string{"gitrepo/ns/one", "helmop/ns/web", "gitrepo/ns/two"}, f.signalled, "a GitRepo that ended is skipped")
}
