package fleetstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
