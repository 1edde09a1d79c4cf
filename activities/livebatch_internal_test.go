package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// signalRecorder records the signals a liveBatcher sends.
type signalRecorder struct {
	mu   sync.Mutex
	sent map[string][]status.LiveSignal
	err  error
}

func (r *signalRecorder) signal(_ context.Context, id, name string, arg any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name != protocol.SignalLive {
		return fmt.Errorf("unexpected signal %s", name)
	}
	if r.sent == nil {
		r.sent = map[string][]status.LiveSignal{}
	}
	r.sent[id] = append(r.sent[id], arg.(status.LiveSignal))
	return r.err
}

// What many clusters tell one GitRepo at about the same time goes as
// few signals, at most liveBatchClusters clusters each, and every report
// arrives.
func TestLiveBatcher_Batches(t *testing.T) {
	rec := &signalRecorder{}
	b := newLiveBatcher(rec.signal, 50*time.Millisecond)
	const clusters = 450
	var wg sync.WaitGroup
	errs := make([]error, clusters)
	for i := range clusters {
		wg.Go(func() {
			errs[i] = b.send(context.Background(), "gitrepo/ns/app", status.LiveSignal{Cluster: fmt.Sprintf("c-%03d", i),
				Reports: []status.LiveReport{{Bundle: "app", Release: "app"}}})
		})
	}
	wg.Go(func() {
		errs := b.send(context.Background(), "gitrepo/ns/other", status.LiveSignal{Cluster: "c-000"})
		assert.NoError(t, errs)
	})
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	sigs := rec.sent["gitrepo/ns/app"]
	assert.Len(t, sigs, 3, "450 clusters: two full batches of 200 and the rest")
	seen := map[string]bool{}
	for _, sig := range sigs {
		assert.LessOrEqual(t, len(sig.Each()), liveBatchClusters)
		for _, one := range sig.Each() {
			require.Len(t, one.Reports, 1)
			seen[one.Cluster] = true
		}
	}
	assert.Len(t, seen, clusters, "every cluster's report delivered")
	assert.Len(t, rec.sent["gitrepo/ns/other"], 1, "batched per GitRepo")
}

// A signal that fails fails every report it carried, so each watch's
// sender retries its own.
func TestLiveBatcher_Errors(t *testing.T) {
	rec := &signalRecorder{err: errors.New("frontend down")}
	b := newLiveBatcher(rec.signal, 10*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			err := b.send(context.Background(), "gitrepo/ns/app", status.LiveSignal{Cluster: fmt.Sprint(i)})
			assert.ErrorContains(t, err, "frontend down")
		})
	}
	wg.Wait()
	assert.Len(t, rec.sent["gitrepo/ns/app"], 1)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b = newLiveBatcher(rec.signal, time.Hour)
	require.ErrorIs(t, b.send(ctx, "gitrepo/ns/app", status.LiveSignal{Cluster: "c"}), context.Canceled)
}
