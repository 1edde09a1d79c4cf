package drift

import (
	"context"
	"sync"
	"time"
)

// DefaultLinger is how long Watches keeps a cluster's monitor running
// after its last Follow returned, for the next Follow to take over.
const DefaultLinger = 30 * time.Second

// Watches keeps one Monitor per cluster in a process, shared by the
// successive Follow calls of the cluster's watch activity: when a
// GitRepo changes what the cluster runs, the workflow starts a new watch
// activity while the old one is still being canceled, and the new one
// hands the running monitor its new targets instead of starting another.
// Its watches stay open and what it knows of each release stays (a
// failed correction's backoff, conflicts), so nothing is corrected twice
// and a new release is watched within a second. The zero value is ready
// to use.
type Watches struct {
	// Linger overrides DefaultLinger.
	Linger   time.Duration
	mu       sync.Mutex
	monitors map[string]*shared
}

// shared is one cluster's running monitor and the Follow calls using it.
type shared struct {
	m      *Monitor
	source any
	users  int
	stop   context.CancelFunc
	idle   *time.Timer
	// latest is when the Follow whose targets the monitor has was
	// scheduled: an older one's targets come too late.
	latest time.Time
}

// Follow makes cluster cfg.Cluster's monitor watch targets until ctx
// ends, starting the monitor unless it runs already. source identifies
// the connection cfg.Getter serves: a monitor of another source (the
// cluster's credentials changed) is replaced. scheduled orders the
// calls: targets of a call scheduled before the one the monitor follows
// (a canceled watch that was slow to start) are not taken. Follow returns
// ctx's error, or New's.
func (ws *Watches) Follow(ctx context.Context, cfg Config, source any, scheduled time.Time, targets []Target) error {
	s, err := ws.acquire(cfg, source)
	if err != nil {
		return err
	}
	defer ws.release(cfg.Cluster, s)
	ws.mu.Lock()
	if ctx.Err() == nil && !scheduled.Before(s.latest) {
		s.latest = scheduled
		s.m.SetTargets(targets)
	}
	ws.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// acquire returns the cluster's monitor, started if need be, counting one
// more user.
func (ws *Watches) acquire(cfg Config, source any) (*shared, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.monitors == nil {
		ws.monitors = map[string]*shared{}
	}
	s := ws.monitors[cfg.Cluster]
	if s != nil && s.source != source {
		s.stop()
		s = nil
	}
	if s == nil {
		m, err := New(cfg)
		if err != nil {
			return nil, err
		}
		ctx, stop := context.WithCancel(context.Background())
		s = &shared{m: m, source: source, stop: stop}
		ws.monitors[cfg.Cluster] = s
		go func() { _ = m.Run(ctx, nil) }()
	}
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.users++
	s.m.passive.Store(false)
	return s, nil
}

// release counts one user less; the last one leaves the monitor running
// for Linger, then stops it unless another Follow took it meanwhile.
func (ws *Watches) release(cluster string, s *shared) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	s.users--
	if s.users > 0 {
		return
	}
	s.m.passive.Store(true)
	linger := ws.Linger
	if linger <= 0 {
		linger = DefaultLinger
	}
	s.idle = time.AfterFunc(linger, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if s.users == 0 && ws.monitors[cluster] == s {
			delete(ws.monitors, cluster)
			s.stop()
		}
	})
}
