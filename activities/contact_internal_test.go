package activities

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// scriptedProber answers Reachable from a script (true: reachable); the
// last answer repeats.
type scriptedProber struct {
	mu     sync.Mutex
	script []bool
	n      int
}

func (p *scriptedProber) Name() string { return "edge-1" }

func (p *scriptedProber) Reachable(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.script[min(p.n, len(p.script)-1)]
	p.n++
	if ok {
		return nil
	}
	return errors.New("API server https://10.0.0.1:6443 unreachable: connection refused")
}

// contactRecorder records the contact signals sent; the first failN
// sends fail.
type contactRecorder struct {
	mu    sync.Mutex
	sent  []protocol.Contact
	failN int
}

func (r *contactRecorder) signal(_ context.Context, id, signal string, arg any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id != protocol.ClusterID("edge-1") || signal != protocol.SignalContact {
		return errors.New("unexpected " + id + " " + signal)
	}
	if r.failN > 0 {
		r.failN--
		return errors.New("frontend unavailable")
	}
	r.sent = append(r.sent, arg.(protocol.Contact))
	return nil
}

func (r *contactRecorder) reachable() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []bool
	for _, c := range r.sent {
		out = append(out, c.Reachable)
	}
	return out
}

// The probe tells the cluster's workflow of a loss only after failures
// in a row (one failed probe is not a lost cluster), of a return at once,
// each once, and retries a report that could not be sent.
func TestProbeContact(t *testing.T) {
	fast := contactProbe{every: 5 * time.Millisecond, retry: time.Millisecond, failures: 2, successes: 2}
	for _, tc := range []struct {
		name        string
		script      []bool
		unreachable bool
		failSends   int
		want        []bool
	}{
		{"steady", []bool{true}, false, 0, nil},
		{"one failure is no loss", []bool{true, false, true}, false, 0, nil},
		{"lost then back", []bool{true, false, false, false, true}, false, 0, []bool{false, true}},
		{"one answer is no return", []bool{true, false, false, true, false}, false, 0, []bool{false}},
		{"lost for good", []bool{true, false}, false, 0, []bool{false}},
		{"believed lost, reachable", []bool{true}, true, 0, []bool{true}},
		{"believed lost, still lost", []bool{false}, true, 0, nil},
		{"report retried", []bool{false}, false, 2, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &contactRecorder{failN: tc.failSends}
			c := &ClusterActivities{Signal: rec.signal, Logger: zap.NewNop()}
			p := &scriptedProber{script: tc.script}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.probeContact(ctx, fast, p, tc.unreachable, "run/1") }()
			require.Eventually(t, func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.n > len(tc.script)+tc.failSends+5
			}, 5*time.Second, time.Millisecond)
			cancel()
			<-done
			assert.Equal(t, tc.want, rec.reachable())
			for _, s := range rec.sent {
				assert.Equal(t, "run/1", s.Watch, "reports name their watch")
				if !s.Reachable {
					assert.Contains(t, s.Reason, "connection refused")
				}
			}
		})
	}
}
