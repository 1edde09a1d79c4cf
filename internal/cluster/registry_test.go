package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
	// memos are the workflows' memos by ID, listed with them; queried
	// counts status queries by ID.
	memos   map[string]*commonpb.Memo
	queried map[string]int
}

// listCount is how many listings asked for workflow id.
func (f *fakeTemporal) listCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists[id]
}

// setMemo gives workflow id the targeting memo rec.
func (f *fakeTemporal) setMemo(t *testing.T, id string, rec protocol.ClusterRecord) {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(rec)
	require.NoError(t, err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.memos == nil {
		f.memos = map[string]*commonpb.Memo{}
	}
	f.memos[id] = &commonpb.Memo{Fields: map[string]*commonpb.Payload{protocol.MemoTargeting: p}}
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
		{Execution: &commonpb.WorkflowExecution{WorkflowId: ids[page]}, Memo: f.memos[ids[page]]},
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
	f.mu.Lock()
	if f.queried == nil {
		f.queried = map[string]int{}
	}
	f.queried[id]++
	f.mu.Unlock()
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
	gotClusters, gotGroups, err := NewRegistry(f, nil).List(context.Background())
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
		_, _, err := NewRegistry(f, nil).List(context.Background())
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
	n, err := NewRegistry(f, nil).NotifyGitRepos(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []string{"gitrepo/ns/one", "helmop/ns/web", "gitrepo/ns/two"}, f.signalled, "a GitRepo that ended is skipped")
}

// TestRegistry_TargetingMemo: a cluster's record comes with the listing
// from its targeting memo, with no query; a workflow without one (a run
// of older code) is queried; without a data converter every one is.
func TestRegistry_TargetingMemo(t *testing.T) {
	clusters := temporalx.RunningOfType(protocol.ClusterWorkflow)
	f := &fakeTemporal{
		listed: map[string][]string{clusters: {"cluster/a", "cluster/b", "cluster/gone", "cluster/a-previous-run"}},
		records: map[string]any{
			"cluster/a": protocol.ClusterRecord{Name: "a", Labels: map[string]string{"env": "stale"}},
			"cluster/b": protocol.ClusterRecord{Name: "b", Labels: map[string]string{"env": "dev"}},
		},
	}
	f.setMemo(t, "cluster/a", protocol.ClusterRecord{Name: "a", Labels: map[string]string{"env": "prod"}, Generation: 3})
	f.setMemo(t, "cluster/gone", protocol.ClusterRecord{Name: "gone", Removed: true, Generation: 2})
	// A run visibility still lists after a continue-as-new: older record.
	f.setMemo(t, "cluster/a-previous-run", protocol.ClusterRecord{Name: "a", Labels: map[string]string{"env": "old"}, Generation: 2})

	got, err := NewRegistry(f, converter.GetDefaultDataConverter()).Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, map[string]string{"env": "prod"}, got[0].Labels, "from the memo")
	assert.Equal(t, map[string]string{"env": "dev"}, got[1].Labels, "queried")
	assert.Equal(t, map[string]int{"cluster/b": 1}, f.queried)

	f.queried = nil
	delete(f.listed, clusters)
	f.listed[clusters] = []string{"cluster/a", "cluster/b", "cluster/gone"}
	got, err = NewRegistry(f, nil).Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"env": "stale"}, got[0].Labels)
	assert.Equal(t, map[string]int{"cluster/a": 1, "cluster/b": 1, "cluster/gone": 1}, f.queried)
}

// TestNotifier_WaitsForMemo: a change is announced only once visibility
// shows the cluster's memo at the change's generation; a removal also
// once the workflow is no longer listed.
func TestNotifier_WaitsForMemo(t *testing.T) {
	// Listed before its first memo is indexed: not yet either.
	f := &fakeTemporal{running: map[string]bool{"cluster/a": true}}
	n := NewNotifier(NewRegistry(f, converter.GetDefaultDataConverter()), time.Minute)

	done := make(chan error, 1)
	go func() {
		_, err := n.Notify(context.Background(), Wait{ID: "cluster/a", Generation: 2}, nil)
		done <- err
	}()
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lists["cluster/a"] >= 2
	}, 10*time.Second, time.Millisecond, "polls while the memo is behind")
	f.setMemo(t, "cluster/a", protocol.ClusterRecord{Name: "a", Generation: 1})
	seen := f.listCount("cluster/a")
	require.Eventually(t, func() bool { return f.listCount("cluster/a") >= seen+2 }, 10*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("announced before visibility showed generation 2 (err %v)", err)
	default:
	}
	f.setMemo(t, "cluster/a", protocol.ClusterRecord{Name: "a", Generation: 2})
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("not announced once the memo caught up")
	}

	_, err := n.Notify(context.Background(), Wait{ID: "cluster/ended", Generation: 5, Removed: true}, nil)
	require.NoError(t, err, "a removed cluster that is no longer listed")
}
