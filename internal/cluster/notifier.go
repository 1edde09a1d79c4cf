package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

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

// notifyRound is one coalesced notification.
type notifyRound struct {
	waitFor  []string
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
// every running GitRepo and HelmOp, having first waited, when waitFor is
// set, until visibility lists that workflow as running (so every GitRepo
// that lists clusters afterwards sees it). It returns how many workflows
// the round signalled. heartbeat, when not nil, is called every second
// while Notify waits.
func (n *Notifier) Notify(ctx context.Context, waitFor string, heartbeat func()) (int, error) {
	n.mu.Lock()
	if n.next == nil {
		n.next = &notifyRound{done: make(chan struct{})}
	}
	r := n.next
	if waitFor != "" {
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

// waitAllListed returns once visibility lists every workflow of ids as
// running, polling with a growing pause.
func (r *Registry) waitAllListed(ctx context.Context, ids []string) error {
	missing := map[string]bool{}
	for _, id := range ids {
		missing[id] = true
	}
	pause := 50 * time.Millisecond
	for {
		var pending []string
		for _, id := range ids {
			if missing[id] {
				pending = append(pending, id)
			}
		}
		for len(pending) > 0 {
			chunk := pending[:min(len(pending), notifyListChunk)]
			pending = pending[len(chunk):]
			quoted := make([]string, len(chunk))
			for i, id := range chunk {
				quoted[i] = "'" + strings.ReplaceAll(id, "'", `\'`) + "'"
			}
			q := fmt.Sprintf("WorkflowId IN (%s) AND ExecutionStatus = 'Running'", strings.Join(quoted, ", "))
			if err := temporalx.EachWorkflow(ctx, r.client, q, func(id string) error { delete(missing, id); return nil }); err != nil {
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
