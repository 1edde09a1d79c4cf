package drift

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// offlineConfig is a monitor config of a cluster nobody serves: with no
// targets, a monitor never contacts it, and the targets it is given are
// never evaluated (the debounce outlasts the test).
func offlineConfig(cluster string) Config {
	return Config{Cluster: cluster, Debounce: time.Hour, Getter: func(string) (genericclioptions.RESTClientGetter, error) {
		return genericclioptions.NewConfigFlags(false).WithWrapConfigFn(func(*rest.Config) *rest.Config {
			return &rest.Config{Host: "https://127.0.0.1:1"}
		}), nil
	}}
}

// follow runs ws.Follow in the background until the returned cancel.
func follow(t *testing.T, ws *Watches, cfg Config, source string) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ws.Follow(ctx, cfg, source, time.Now(), nil) }()
	t.Cleanup(cancel)
	return func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	}
}

// monitorOf returns the cluster's shared monitor and its user count.
func monitorOf(ws *Watches, cluster string) (*Monitor, int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if s := ws.monitors[cluster]; s != nil {
		return s.m, s.users
	}
	return nil, 0
}

func waitUsers(t *testing.T, ws *Watches, cluster string, users int) *Monitor {
	t.Helper()
	var m *Monitor
	require.Eventually(t, func() bool {
		var n int
		m, n = monitorOf(ws, cluster)
		return n == users
	}, 5*time.Second, 10*time.Millisecond)
	return m
}

func TestWatches_NextFollowTakesOverTheMonitor(t *testing.T) {
	ws := &Watches{Linger: 200 * time.Millisecond}
	cfg := offlineConfig("c1")
	stopOld := follow(t, ws, cfg, "creds-1")
	m := waitUsers(t, ws, "c1", 1)
	stopNew := follow(t, ws, cfg, "creds-1")
	assert.Same(t, m, waitUsers(t, ws, "c1", 2), "the new watch shares the running monitor")
	stopOld()
	assert.Same(t, m, waitUsers(t, ws, "c1", 1), "the old watch's end leaves it to the new one")
	follow(t, ws, offlineConfig("c2"), "creds-1")
	waitUsers(t, ws, "c2", 1)
	assert.NotSame(t, m, waitUsers(t, ws, "c2", 1), "another cluster has its own")

	stopNew()
	time.Sleep(50 * time.Millisecond)
	got, _ := monitorOf(ws, "c1")
	assert.Same(t, m, got, "it lingers for the next watch")
	stopAgain := follow(t, ws, cfg, "creds-1")
	assert.Same(t, m, waitUsers(t, ws, "c1", 1), "a watch within the linger takes it over")
	stopAgain()
	require.Eventually(t, func() bool { got, _ := monitorOf(ws, "c1"); return got == nil }, 5*time.Second, 10*time.Millisecond,
		"stopped after the linger")
	select {
	case <-m.stop:
	case <-time.After(5 * time.Second):
		t.Fatal("the monitor's Run did not end")
	}
}

func TestWatches_NewCredentialsReplaceTheMonitor(t *testing.T) {
	ws := &Watches{}
	cfg := offlineConfig("c1")
	follow(t, ws, cfg, "creds-1")
	old := waitUsers(t, ws, "c1", 1)
	follow(t, ws, cfg, "creds-2")
	require.Eventually(t, func() bool { m, _ := monitorOf(ws, "c1"); return m != old }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-old.stop:
	case <-time.After(5 * time.Second):
		t.Fatal("the monitor of the old credentials still runs")
	}
}

// A lingering monitor corrects nothing (another process may have taken
// the cluster over); a watch that uses it again makes it correct again.
func TestWatches_LingeringMonitorIsPassive(t *testing.T) {
	ws := &Watches{Linger: time.Hour}
	cfg := offlineConfig("c1")
	stop := follow(t, ws, cfg, "creds-1")
	m := waitUsers(t, ws, "c1", 1)
	assert.False(t, m.passive.Load(), "in use: it corrects")
	stop()
	assert.True(t, m.passive.Load(), "lingering: it only reports")
	follow(t, ws, cfg, "creds-1")
	waitUsers(t, ws, "c1", 1)
	assert.False(t, m.passive.Load(), "taken over: it corrects again")
}

// A watch scheduled before the one the monitor follows (canceled, and slow
// to start) does not hand it its stale targets.
func TestWatches_StaleTargetsAreNotTaken(t *testing.T) {
	ws := &Watches{}
	cfg := offlineConfig("c1")
	now := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	newer := []Target{{Release: "new", Namespace: "ns"}}
	go func() { _ = ws.Follow(ctx, cfg, "creds-1", now, newer) }()
	waitUsers(t, ws, "c1", 1)
	go func() {
		_ = ws.Follow(ctx, cfg, "creds-1", now.Add(-time.Second), []Target{{Release: "old", Namespace: "ns"}})
	}()
	waitUsers(t, ws, "c1", 2)
	ws.mu.Lock()
	latest := ws.monitors["c1"].latest
	ws.mu.Unlock()
	assert.Equal(t, now, latest, "the newer watch's targets stand")
}
