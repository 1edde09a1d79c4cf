package activities

import (
	"context"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// liveBatcher delivers the drift watches' reports to the GitRepos: what
// the watches of this worker's clusters tell one GitRepo within
// liveBatchDelay goes as one signal (status.LiveSignal.More), so a
// thousand clusters whose watches start together after a rollout add a
// handful of signals to the GitRepo's history, not a thousand it must
// work through before it answers a status query.
type liveBatcher struct {
	signal Signaller
	delay  time.Duration

	mu   sync.Mutex
	next map[string]*liveBatch // by workflow ID
}

// liveBatch is one signal in the making.
type liveBatch struct {
	workflowID string
	sigs       []status.LiveSignal
	done       chan struct{}
	err        error
}

const (
	// liveBatchDelay is how long reports wait for others to join them.
	liveBatchDelay = 200 * time.Millisecond
	// liveBatchClusters bounds the clusters of one signal, which keeps it
	// well under Temporal's payload limits.
	liveBatchClusters = 200
	// liveSendTimeout bounds one signal.
	liveSendTimeout = 30 * time.Second
)

func newLiveBatcher(signal Signaller, delay time.Duration) *liveBatcher {
	return &liveBatcher{signal: signal, delay: delay, next: map[string]*liveBatch{}}
}

// send delivers sig to workflowID with the reports sent to it about the
// same time, and returns the signal's error once it was sent (or ctx's).
func (b *liveBatcher) send(ctx context.Context, workflowID string, sig status.LiveSignal) error {
	b.mu.Lock()
	lb := b.next[workflowID]
	if lb == nil {
		lb = &liveBatch{workflowID: workflowID, done: make(chan struct{})}
		b.next[workflowID] = lb
		go func() {
			time.Sleep(b.delay)
			b.flush(workflowID, lb)
		}()
	}
	lb.sigs = append(lb.sigs, sig)
	if len(lb.sigs) >= liveBatchClusters {
		delete(b.next, workflowID) // full: later reports start the next
		go b.deliver(lb)
	}
	b.mu.Unlock()
	select {
	case <-lb.done:
		return lb.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush sends lb unless it was sent already (full before its delay
// ended).
func (b *liveBatcher) flush(workflowID string, lb *liveBatch) {
	b.mu.Lock()
	if b.next[workflowID] != lb {
		b.mu.Unlock()
		return
	}
	delete(b.next, workflowID)
	b.mu.Unlock()
	b.deliver(lb)
}

// deliver sends lb, which no report joins any more.
func (b *liveBatcher) deliver(lb *liveBatch) {
	ctx, cancel := context.WithTimeout(context.Background(), liveSendTimeout)
	defer cancel()
	sig := lb.sigs[0]
	sig.More = lb.sigs[1:]
	lb.err = b.signal(ctx, lb.workflowID, protocol.SignalLive, sig)
	close(lb.done)
}
