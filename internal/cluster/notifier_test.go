package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// TestNotifier_CoalescesBursts: the requests that arrive while a round
// runs are served by one next round: one visibility query for all the
// workflows they wait for, one signal per GitRepo.
func TestNotifier_CoalescesBursts(t *testing.T) {
	repos := temporalx.RunningOfTypes(protocol.GitRepoWorkflow, protocol.HelmOpWorkflow)
	gate := make(chan struct{})
	f := &fakeTemporal{
		listed:     map[string][]string{repos: {"gitrepo/ns/one", "helmop/ns/web"}},
		records:    map[string]any{"gitrepo/ns/one": struct{}{}, "helmop/ns/web": struct{}{}},
		running:    map[string]bool{},
		hiddenFor:  map[string]int{"cluster/c-007": 2}, // visibility lags for one
		signalGate: gate, signalling: make(chan struct{}),
	}
	const burst = 150
	for i := range burst + 1 {
		f.running[fmt.Sprintf("cluster/c-%03d", i)] = true
	}
	n := NewNotifier(NewRegistry(f, nil), time.Minute)
	ctx := context.Background()

	// The first request's round holds at its first signal ...
	var wg sync.WaitGroup
	errs := make([]error, burst+1)
	wg.Go(func() { _, errs[burst] = n.Notify(ctx, Wait{ID: fmt.Sprintf("cluster/c-%03d", burst)}, nil) })
	<-f.signalling
	// ... while a burst of requests arrives.
	for i := range burst {
		wg.Go(func() { _, errs[i] = n.Notify(ctx, Wait{ID: fmt.Sprintf("cluster/c-%03d", i)}, nil) })
	}
	require.Eventually(t, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.next != nil && len(n.next.waitFor) == burst
	}, 10*time.Second, time.Millisecond)
	close(gate)
	wg.Wait()

	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"gitrepo/ns/one", "helmop/ns/web", "gitrepo/ns/one", "helmop/ns/web"}, f.signalled,
		"two rounds: the first request's, then the whole burst's")
	// Round 1: one query. Round 2: 150 IDs in two chunks, then c-007
	// alone until it shows up (hidden for two listings).
	assert.Equal(t, 1+2+1+1, f.inQueries)
	assert.Equal(t, 3, f.lists["cluster/c-007"])
}

// TestNotifier_WaitsForListing: a request returns only once its workflow
// is listed, and with its context when it never is.
func TestNotifier_WaitsForListing(t *testing.T) {
	f := &fakeTemporal{running: map[string]bool{"cluster/new": true}, hiddenFor: map[string]int{"cluster/new": 3}}
	n := NewNotifier(NewRegistry(f, nil), time.Minute)
	_, err := n.Notify(context.Background(), Wait{ID: "cluster/new"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 4, f.lists["cluster/new"])

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = n.Notify(ctx, Wait{ID: "cluster/never"}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	t.Run("a round that times out fails its requests", func(t *testing.T) {
		n := NewNotifier(NewRegistry(f, nil), 200*time.Millisecond)
		_, err := n.Notify(context.Background(), Wait{ID: "cluster/never"}, nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "1 workflow(s) not listed as running yet")
	})
}
