package history

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestAppend_KeepsNewestLimit(t *testing.T) {
	var h []Entry
	for i := 1; i <= Limit+5; i++ {
		h = Append(h, Entry{Seq: int64(i), Kind: KindRollout})
	}
	require.Len(t, h, Limit)
	assert.Equal(t, int64(6), h[0].Seq, "the oldest five are dropped")
	assert.Equal(t, int64(Limit+5), h[len(h)-1].Seq)
}

func TestAppend_ClipsMessagesAndRows(t *testing.T) {
	rows := make([]Row, MaxRows+10)
	for i := range rows {
		rows[i] = Row{Cluster: fmt.Sprint("c", i), Bundle: "b", State: status.Ready}
	}
	rows[len(rows)-1] = Row{Cluster: "bad", Bundle: "b", State: status.ErrApplied, Message: strings.Repeat("x", 1000)}
	h := Append(nil, Entry{Seq: 1, Message: strings.Repeat("y", 1000), Clusters: rows})
	require.Len(t, h[0].Clusters, MaxRows)
	assert.Equal(t, "bad", h[0].Clusters[0].Cluster, "failures are kept first")
	assert.LessOrEqual(t, len(h[0].Clusters[0].Message), MaxMessage+len("…"))
	assert.LessOrEqual(t, len(h[0].Message), MaxMessage+len("…"))
}

func TestAppend_TrimsOldRowsSuccessesFirst(t *testing.T) {
	var h []Entry
	for i := 1; i <= 600; i++ {
		rows := []Row{{Cluster: "fail", Bundle: "b", State: status.ErrApplied, Class: outcome.BundleFailed, Message: "boom"}}
		for c := range 5 {
			rows = append(rows, Row{Cluster: fmt.Sprint("cluster-", c), Bundle: "b", State: status.Ready,
				DeploymentID: strings.Repeat("a", 64) + ":" + strings.Repeat("b", 64)})
		}
		h = Append(h, Entry{Seq: int64(i), Clusters: rows, Counts: Counts{OK: 5, Failed: 1}})
	}
	total := 0
	for _, e := range h {
		total += rowsSize(e.Clusters)
	}
	assert.LessOrEqual(t, total, RowBudget)
	assert.True(t, h[0].Trimmed)
	assert.Len(t, h[0].Failures(), 1, "an old entry keeps its failure while successes are enough to trim")
	assert.Equal(t, Counts{OK: 5, Failed: 1}, h[0].Counts, "counts survive trimming")
	last := h[len(h)-1]
	assert.False(t, last.Trimmed)
	assert.Len(t, last.Clusters, 6)
}

// TestAppend_StateSize measures the history at its bound: 1,000 entries,
// each of a rollout that changed 10 bundles on 10 clusters.
func TestAppend_StateSize(t *testing.T) {
	var h []Entry
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= Limit; i++ {
		var rows []Row
		for c := range 10 {
			for b := range 10 {
				id := fmt.Sprintf("%064x:%064x", i*1000+c*10+b, i)
				rows = append(rows, Row{Cluster: fmt.Sprint("cluster-", c), Bundle: fmt.Sprint("bundle-", b),
					Release: fmt.Sprint("ns-bundle-", b), State: status.Ready, DeploymentID: id})
			}
		}
		h = Append(h, Entry{Seq: int64(i), Kind: KindRollout, Commit: fmt.Sprintf("%040x", i),
			Trigger: Trigger{Kind: TriggerSync, Identity: protocol.Identity{User: "alice@laptop"}},
			Start:   at, End: at.Add(time.Minute), Outcome: Succeeded, Clusters: rows, Counts: Counts{OK: 100},
			Rollout: fmt.Sprintf("rollout/default/app/%040x-1", i),
			Approvals: []Approval{{Bundle: "bundle-0", Partition: "canary",
				Identity: protocol.Identity{User: "bob@host", Subject: "CN=bob"}, At: at}}})
	}
	raw, err := json.Marshal(h)
	require.NoError(t, err)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, err = w.Write(raw)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	t.Logf("history of %d entries: %d bytes JSON, %d bytes zlib", len(h), len(raw), z.Len())
	assert.Less(t, len(raw), 1<<20, "well under Temporal's 2 MiB payload limit even uncompressed")
	assert.Len(t, h[len(h)-1].Clusters, 100, "the newest entry keeps every row")
}

func TestFilter(t *testing.T) {
	h := []Entry{
		{Seq: 1, Clusters: []Row{{Cluster: "a", Bundle: "x"}, {Cluster: "b", Bundle: "y"}},
			Approvals: []Approval{{Bundle: "x"}, {Bundle: "y"}}},
		{Seq: 2, Clusters: []Row{{Cluster: "b", Bundle: "x"}}},
		{Seq: 3},
	}
	tests := []struct {
		name, cluster, bundle string
		want                  []int64
		rows                  int // rows of the first entry returned
	}{
		{name: "no filter", want: []int64{1, 2, 3}, rows: 2},
		{name: "cluster", cluster: "b", want: []int64{1, 2}, rows: 1},
		{name: "bundle", bundle: "x", want: []int64{1, 2}, rows: 1},
		{name: "both", cluster: "a", bundle: "x", want: []int64{1}, rows: 1},
		{name: "none", cluster: "z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Filter(h, tt.cluster, tt.bundle)
			var seqs []int64
			for _, e := range got {
				seqs = append(seqs, e.Seq)
			}
			assert.Equal(t, tt.want, seqs)
			if len(got) > 0 {
				assert.Len(t, got[0].Clusters, tt.rows)
			}
		})
	}
	assert.Len(t, Filter(h, "", "x")[0].Approvals, 1, "approvals are filtered by bundle")
	assert.Len(t, h[0].Clusters, 2, "the input is not modified")
}

func TestRows(t *testing.T) {
	prev := []status.Deployment{
		{Bundle: "b", Cluster: "same", DeploymentID: "m1:o", State: status.Ready},
		{Bundle: "b", Cluster: "moved", DeploymentID: "m1:o", State: status.Ready},
		{Bundle: "b", Cluster: "recovered", DeploymentID: "m2:o", State: status.ErrApplied, Outcome: outcome.BundleFailed},
	}
	deps := []status.Deployment{
		{Bundle: "b", Cluster: "same", DeploymentID: "m1:o", State: status.Ready},
		{Bundle: "b", Cluster: "moved", DeploymentID: "m2:o", State: status.Ready, Message: "fine"},
		{Bundle: "b", Cluster: "new", DeploymentID: "m2:o", State: status.NotReady},
		{Bundle: "b", Cluster: "failed", DeploymentID: "m2:o", State: status.ErrApplied, Outcome: outcome.BundleFailed, Message: "boom"},
		{Bundle: "b", Cluster: "waiting", DeploymentID: "m2:o", State: status.Pending},
		{Bundle: "b", Cluster: "recovered", DeploymentID: "m2:o", State: status.Ready},
	}
	rows, counts := Rows(deps, prev)
	var clusters []string
	for _, r := range rows {
		clusters = append(clusters, r.Cluster)
	}
	assert.Equal(t, []string{"moved", "new", "failed", "waiting", "recovered"}, clusters,
		"an unchanged Ready release has no row; one Ready at the ID that failed before has (a retry recovered it)")
	assert.Equal(t, Counts{OK: 4, Failed: 1, Other: 1}, counts)
	assert.Empty(t, rows[0].Message, "a successful row drops its message")
	assert.Equal(t, "boom", rows[2].Message)
	assert.Equal(t, "m2", Expand([]Entry{{Clusters: rows}})[0].Clusters[0].ManifestID)
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		name string
		in   Result
		want Outcome
	}{
		{name: "all ok", in: Result{Counts: Counts{OK: 3}}, want: Succeeded},
		{name: "render failed", in: Result{Failed: true}, want: Failed},
		{name: "only failures", in: Result{Counts: Counts{Failed: 2}}, want: Failed},
		{name: "some failures", in: Result{Counts: Counts{OK: 1, Failed: 1}}, want: Partial},
		{name: "halted", in: Result{Halted: true, Counts: Counts{Failed: 1}}, want: Halted},
		{name: "superseded", in: Result{Superseded: true, Halted: true}, want: Superseded},
		{name: "waiting", in: Result{Waiting: true, Counts: Counts{OK: 1}}, want: Waiting},
		{name: "nothing to do", in: Result{}, want: Succeeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, OutcomeOf(tt.in)) })
	}
}

func TestTrigger_String(t *testing.T) {
	tests := []struct {
		in   Trigger
		want string
	}{
		{Trigger{Kind: TriggerPoll}, "poll"},
		{Trigger{Kind: TriggerWebhook, Delivery: "7f3a9c01-aaaa"}, "webhook 7f3a9c01…"},
		{Trigger{Kind: TriggerSync, Identity: protocol.Identity{User: "alice@host"}}, "sync by alice@host"},
		{Trigger{}, "unknown"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.in.String())
	}
}
func TestFold(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	failed := Entry{Seq: 4, Kind: KindRollout, Commit: "c1", Trigger: Trigger{Kind: TriggerWebhook, Delivery: "d-1"},
		Start: t0, End: t0.Add(time.Second), Outcome: Failed, Message: "first"}
	retry := func(outcome Outcome, mutate func(*Entry)) Entry {
		e := Entry{Kind: KindRollout, Commit: "c1", Trigger: Trigger{Kind: TriggerRetry}, Start: t0.Add(time.Minute),
			End: t0.Add(2 * time.Minute), Outcome: outcome, Message: "again", Rollout: "rollout/x-2"}
		if mutate != nil {
			mutate(&e)
		}
		return e
	}
	for _, tc := range []struct {
		name string
		e    Entry
		want bool
	}{
		{"a retry failing the same way folds", retry(Failed, nil), true},
		{"a retry that succeeds is its own entry", retry(Succeeded, nil), false},
		{"a retry failing otherwise (halted) is its own entry", retry(Halted, nil), false},
		{"a retry of another commit is its own entry", retry(Failed, func(e *Entry) { e.Commit = "c2" }), false},
		{"a failure not from the backoff (sync) is its own entry", retry(Failed, func(e *Entry) { e.Trigger = Trigger{Kind: TriggerSync} }), false},
		{"a rollback is not folded into a rollout", retry(Failed, func(e *Entry) { e.Kind = KindRollback }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := []Entry{failed}
			assert.Equal(t, tc.want, Fold(entries, tc.e))
			if !tc.want {
				assert.Equal(t, failed, entries[0], "unchanged")
				return
			}
			got := entries[0]
			assert.Equal(t, 1, got.Retries)
			assert.Equal(t, int64(4), got.Seq, "keeps its place")
			assert.Equal(t, failed.Trigger, got.Trigger, "keeps what started it")
			assert.Equal(t, failed.Start, got.Start)
			assert.Equal(t, tc.e.End, got.End, "ends with the last retry")
			assert.Equal(t, "again", got.Message)
			assert.Equal(t, "rollout/x-2", got.Rollout)
		})
	}
	assert.False(t, Fold(nil, retry(Failed, nil)), "nothing to fold into")
}
