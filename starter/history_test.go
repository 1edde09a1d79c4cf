package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestPrintHistory_Table(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	entries := []history.Entry{
		{Seq: 1, Kind: history.KindRollout, Commit: "0123456789abcdef0123", Start: at, End: at.Add(90 * time.Second),
			Trigger: history.Trigger{Kind: history.TriggerWebhook, Delivery: "7f3a9c01-1111"}, Outcome: history.Partial,
			Counts: history.Counts{OK: 1, Failed: 1},
			Approvals: []history.Approval{{Bundle: "api", Partition: "canary",
				Identity: protocol.Identity{User: "alice@host"}, At: at.Add(time.Minute)}},
			Clusters: []history.Row{{Cluster: "cluster-2", Bundle: "api", State: status.ErrApplied,
				Class: outcome.BundleFailed, Message: "admission\ndenied"}}},
		{Seq: 2, Kind: history.KindRollback, Commit: "abc", Start: at, Outcome: history.Succeeded,
			Trigger: history.Trigger{Kind: history.TriggerSync, Identity: protocol.Identity{User: "bob@laptop"}}},
		{Seq: 3, Kind: history.KindRollout, Commit: "def", Start: at, Outcome: history.Failed, Retries: 9,
			Trigger: history.Trigger{Kind: history.TriggerPoll}},
	}
	var b bytes.Buffer
	require.NoError(t, printHistory(&b, output.Table, entries))
	out := b.String()
	assert.Contains(t, out, "SEQ")
	assert.Regexp(t, `1\s+2026-11-30T05:00:00Z\s+1m30s\s+rollout\s+0123456789ab\s+webhook 7f3a9c01…\s+partial\s+1 ok, 1 failed`, out)
	assert.Contains(t, out, "approved api/canary by alice@host at 2026-11-30T05:01:00Z")
	assert.Contains(t, out, "cluster-2 api: BundleFailed admission denied")
	assert.Regexp(t, `2\s+2026-11-30T05:00:00Z\s+-\s+rollback\s+abc\s+sync by bob@laptop\s+succeeded`, out)
	assert.Regexp(t, `3\s+.*\s+def\s+poll\s+failed, 9 retries`, out, "retries folded into the entry are counted")

	b.Reset()
	require.NoError(t, printHistory(&b, output.JSON, nil))
	assert.Equal(t, "[]\n", b.String(), "no history is an empty list in JSON")
}

func TestPrintPinned(t *testing.T) {
	var b bytes.Buffer
	printPinned(&b, status.GitRepo{Name: "app", Branch: "main", LatestCommit: "ffff0000ffff0000",
		Pinned: &status.Pin{Commit: "abcd0000abcd0000", By: "bob@host", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}})
	assert.Contains(t, b.String(), "Pinned:   abcd0000abcd by bob@host at 2026-01-02T03:04:05Z (rollback); `flotilla resume app` follows main again")
	assert.Contains(t, b.String(), "Newest:   ffff0000ffff on the remote, not rolled out while pinned")
	b.Reset()
	printPinned(&b, status.GitRepo{Name: "app"})
	assert.Empty(t, b.String())
}

func TestPrintConditions_PinnedShownOnce(t *testing.T) {
	var b bytes.Buffer
	st := status.GitRepo{Name: "app", Pinned: &status.Pin{Commit: "abcd0000abcd0000"},
		Conditions: []status.Condition{{Type: status.ConditionPinned, Status: status.ConditionTrue, Reason: status.ReasonRollback,
			Message: "pinned to abcd0000abcd0000"}}}
	printConditions(&b, st, map[string]bool{})
	assert.Contains(t, b.String(), "Pinned=True (Rollback)")
	assert.NotContains(t, b.String(), "pinned to abcd", "the Pinned: line says it already")
}
