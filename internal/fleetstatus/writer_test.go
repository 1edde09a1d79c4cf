package fleetstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestWriter_Scheduling: what makes a tracked object due for a read: its
// first Track, a new generation, a condition set by the controller, or
// its interval running out; not a Track of the generation it has. Forget
// queues the deletion of a GitRepo's mirrors.
func TestWriter_Scheduling(t *testing.T) {
	w := NewWriter(WriterConfig{})
	now := time.Now()
	ref := Ref{Kind: KindGitRepo, Namespace: "n", Name: "a", Generation: 1, UID: "u1"}
	due := func() int {
		jobs := w.dueJobs(now)
		for _, e := range w.entries { // as process does when it ends
			e.busy, e.seen, e.due = false, e.changes, now.Add(time.Minute)
		}
		return len(jobs)
	}

	w.Track(ref)
	assert.Equal(t, 1, due(), "first Track")
	w.Track(ref)
	assert.Equal(t, 0, due(), "same generation")
	ref.Generation = 2
	w.Track(ref)
	assert.Equal(t, 1, due(), "new generation")
	w.SetCondition(ref, Condition{Type: "Accepted", Status: "False", Reason: "Invalid"})
	assert.Equal(t, 1, due(), "condition set")
	assert.Equal(t, Condition{Type: "Accepted", Status: "False", Reason: "Invalid"}, w.entries[ref.key()].overrides["Accepted"])
	w.SetCondition(ref, Condition{Type: "Accepted"})
	assert.Empty(t, w.entries[ref.key()].overrides, "an empty status lifts the override")
	assert.Equal(t, 1, due())
	now = now.Add(2 * time.Minute)
	assert.Equal(t, 1, due(), "interval ran out")

	old := w.entries[ref.key()]
	ref.UID = "u2"
	w.Track(ref)
	assert.NotSame(t, old, w.entries[ref.key()], "another object of that name starts afresh")

	w.Forget(ref)
	assert.Empty(t, w.entries)
	assert.Equal(t, 1, due(), "the mirrors' deletion")
	assert.Equal(t, 0, due())
	w.Forget(Ref{Kind: KindCluster, Name: "c"})
	assert.Equal(t, 0, due(), "clusters have no mirrors")
}

// An object created after the Writer started is news from its first
// observation: a GitRepo a Policy refused before its status was first read
// gets its PolicyViolation event (the race failed CI's TestKubeNative).
// One that was there before (a restart, a leader change) repeats none.
func TestWriter_FirstObservationOfNewObject(t *testing.T) {
	w := NewWriter(WriterConfig{})
	refused := Observe(status.GitRepo{PolicyViolation: "Policy team-a/strict refuses repo"})
	firstEvents := func(ref Ref) []Event {
		w.Track(ref)
		return Transitions(w.entries[ref.key()].obs, refused)
	}
	existing := Ref{Kind: KindGitRepo, Namespace: "n", Name: "old", UID: "u1", Created: w.started.Add(-time.Hour)}
	assert.Empty(t, firstEvents(existing), "an object from before the start")
	created := Ref{Kind: KindGitRepo, Namespace: "n", Name: "new", UID: "u2", Created: w.started.Add(time.Second)}
	evs := firstEvents(created)
	if assert.Len(t, evs, 1) {
		assert.Equal(t, ReasonPolicyViolation, evs[0].Reason)
	}
	recreated := existing
	recreated.UID, recreated.Created = "u3", w.started.Add(2*time.Second)
	assert.Len(t, firstEvents(recreated), 1, "an object of an old name created since the start")
}
