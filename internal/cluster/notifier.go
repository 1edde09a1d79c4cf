package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// Notifier tells the GitRepos (and HelmOps) that clusters or groups
// changed, coalescing the requests of a burst: requests that arrive while
// a round runs are served together by the next round, which waits for all
// their workflows to be listed with one visibility query per
// notifyListChunk of them and then signals each GitRepo once. A thousand
// clusters registered at once cost a few rounds, not a thousand
// visibility polls and a thousand signals to every GitRepo, which would
// also re-target each GitRepo a thousand times.
//
// A Notifier is safe for concurrent use; its rounds run in the background
// and end when no request waits.
type Notifier struct {
	reg *Registry
	// timeout bounds one round.
	timeout time.Duration

	mu      sync.Mutex
	next    *notifyRound
	running bool
}

// Wait is what a notification waits for visibility to show before the
// GitRepos are told: workflow ID listed as running and, with Generation
// set, its targeting memo (protocol.MemoTargeting) at that record
// generation or later. Removed: or the workflow no longer listed as
// running. The zero Wait waits for nothing.
type Wait struct {
	ID         string
	Generation int64
	Removed    bool
}

// notifyRound is one coalesced notification.
type notifyRound struct {
	waitFor  []Wait
	done     chan struct{}
	signaled int
	err      error
}

// notifyListChunk is how many workflow IDs one visibility query checks.
const notifyListChunk = 100

// NewNotifier returns a Notifier working through reg; a round taking
// longer than timeout fails every request it serves.
func NewNotifier(reg *Registry, timeout time.Duration) *Notifier {
	return &Notifier{reg: reg, timeout: timeout}
}

// Notify returns once a round that started after this call has signalled
// every running GitRepo and HelmOp, having first waited until visibility
// shows what waitFor says (so every GitRepo that lists clusters afterwards
// sees the change). It returns how many workflows the round signalled.
// heartbeat, when not nil, is called every second while Notify waits.
func (n *Notifier) Notify(ctx context.Context, waitFor Wait, heartbeat func()) (int, error) {
	n.mu.Lock()
	if n.next == nil {
		n.next = &notifyRound{done: make(chan struct{})}
	}
	r := n.next
	if waitFor.ID != "" {
		r.waitFor = append(r.waitFor, waitFor)
	}
	if !n.running {
		n.running = true
		go n.loop()
	}
	n.mu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return r.signaled, r.err
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
			if heartbeat != nil {
				heartbeat()
			}
		}
	}
}

// loop runs rounds while requests wait.
func (n *Notifier) loop() {
	for {
		n.mu.Lock()
		r := n.next
		n.next = nil
		if r == nil {
			n.running = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
		r.signaled, r.err = n.run(ctx, r)
		cancel()
		close(r.done)
	}
}

func (n *Notifier) run(ctx context.Context, r *notifyRound) (int, error) {
	if err := n.reg.waitAllListed(ctx, r.waitFor); err != nil {
		return 0, err
	}
	return n.reg.NotifyGitRepos(ctx)
}

// waitAllListed returns once visibility shows what every wait says,
// polling with a growing pause.
func (r *Registry) waitAllListed(ctx context.Context, waits []Wait) error {
	missing := map[string]Wait{}
	for _, w := range waits {
		if prev, ok := missing[w.ID]; !ok || w.Generation > prev.Generation || w.Removed {
			missing[w.ID] = w
		}
	}
	pause := 50 * time.Millisecond
	for {
		pending := make([]string, 0, len(missing))
		for id := range missing {
			pending = append(pending, id)
		}
		slices.Sort(pending)
		for len(pending) > 0 {
			chunk := pending[:min(len(pending), notifyListChunk)]
			pending = pending[len(chunk):]
			if err := r.checkListed(ctx, chunk, missing); err != nil {
				return err
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d workflow(s) not listed as running yet: %w", len(missing), ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// checkListed lists the workflows of ids that run and removes from
// missing each wait visibility now satisfies.
func (r *Registry) checkListed(ctx context.Context, ids []string, missing map[string]Wait) error {
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = "'" + strings.ReplaceAll(id, "'", `\'`) + "'"
	}
	q := fmt.Sprintf("WorkflowId IN (%s) AND ExecutionStatus = 'Running'", strings.Join(quoted, ", "))
	listed := map[string]bool{}
	err := temporalx.EachInfo(ctx, r.client, q, func(info *workflowpb.WorkflowExecutionInfo) error {
		id := info.GetExecution().GetWorkflowId()
		listed[id] = true
		w := missing[id]
		if w.Generation == 0 {
			delete(missing, id)
			return nil
		}
		var rec protocol.ClusterRecord
		ok, err := r.memo(info, &rec)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		// Only runs that keep the memo announce generations; one listed
		// without it yet is not indexed at that change (or any) yet. A
		// registry that cannot read memos queries every record instead,
		// so being listed is all it needs.
		if (ok && rec.Generation >= w.Generation) || r.dc == nil {
			delete(missing, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if w, ok := missing[id]; ok && w.Removed && !listed[id] {
			delete(missing, id) // ended: no longer listed as a cluster
		}
	}
	return nil
}
