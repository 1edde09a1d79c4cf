package drift

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// sender delivers reports per GitRepo: only those that changed, merged
// while a GitRepo's budget (ReportBurst, then one per ReportInterval) is
// spent, so a cluster with constant churn adds a bounded number of
// signals to a GitRepo's history.
type sender struct {
	cfg  Config
	mu   sync.Mutex
	wake chan struct{}
	// pending are the reports to send, by GitRepo and release key.
	pending map[string]map[string]status.LiveReport
	// last is the encoding of each release's last report handed over, by
	// GitRepo and release.
	last    map[string]string
	budgets map[string]*rate.Limiter
}

func newSender(cfg Config) *sender {
	return &sender{cfg: cfg, wake: make(chan struct{}, 1), pending: map[string]map[string]status.LiveReport{},
		last: map[string]string{}, budgets: map[string]*rate.Limiter{}}
}

// put queues r for gitRepo unless it says what the last one said.
func (s *sender) put(gitRepo string, r status.LiveReport) {
	b, _ := json.Marshal(r)
	key := r.Namespace + "/" + r.Release
	s.mu.Lock()
	if s.last[gitRepo+" "+key] == string(b) {
		s.mu.Unlock()
		return
	}
	s.last[gitRepo+" "+key] = string(b)
	if s.pending[gitRepo] == nil {
		s.pending[gitRepo] = map[string]status.LiveReport{}
	}
	s.pending[gitRepo][key] = r
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// keep forgets the reports of every GitRepo not in gitRepos (the monitor
// watches none of its releases any more): nothing is sent to it again.
func (s *sender) keep(gitRepos map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for g := range s.pending {
		if !gitRepos[g] {
			delete(s.pending, g)
		}
	}
	for k := range s.last {
		if g, _, _ := strings.Cut(k, " "); !gitRepos[g] {
			delete(s.last, k)
		}
	}
	for g := range s.budgets {
		if !gitRepos[g] {
			delete(s.budgets, g)
		}
	}
}

// run sends until ctx ends.
func (s *sender) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// The flush sees every put so far: a wake left from one would
		// retry a failed send at once instead of after sendRetry.
		select {
		case <-s.wake:
		default:
		}
		timer.Reset(s.flush(ctx))
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// sendRetry is the pause before a failed send is tried again.
const sendRetry = 2 * time.Second

// flush sends every GitRepo's pending reports its budget allows and
// returns when to try again.
func (s *sender) flush(ctx context.Context) time.Duration {
	next := time.Hour
	s.mu.Lock()
	repos := make([]string, 0, len(s.pending))
	for g := range s.pending {
		repos = append(repos, g)
	}
	s.mu.Unlock()
	slices.Sort(repos)
	for _, g := range repos {
		if wait := s.send(ctx, g); wait > 0 {
			next = min(next, wait)
		}
	}
	return next
}

// send sends gitRepo's pending reports if its budget allows, returning
// how long to wait otherwise (or after a failure).
func (s *sender) send(ctx context.Context, gitRepo string) time.Duration {
	s.mu.Lock()
	budget := s.budgets[gitRepo]
	if budget == nil {
		budget = rate.NewLimiter(rate.Every(s.cfg.ReportInterval), s.cfg.ReportBurst)
		s.budgets[gitRepo] = budget
	}
	r := budget.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		s.mu.Unlock()
		return d
	}
	batch := s.pending[gitRepo]
	delete(s.pending, gitRepo)
	s.mu.Unlock()
	reports := make([]status.LiveReport, 0, len(batch))
	for _, rep := range batch {
		reports = append(reports, rep)
	}
	slices.SortFunc(reports, func(a, b status.LiveReport) int {
		return strings.Compare(a.Namespace+"/"+a.Release, b.Namespace+"/"+b.Release)
	})
	if err := s.cfg.Report(ctx, gitRepo, reports); err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("Drift report not delivered", zap.String("gitrepo", gitRepo), zap.String("cluster", s.cfg.Cluster), zap.Error(err))
		}
		s.requeue(gitRepo, batch)
		return sendRetry
	}
	return 0
}

// requeue puts back a batch that could not be sent, under newer reports.
func (s *sender) requeue(gitRepo string, batch map[string]status.LiveReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[gitRepo] == nil {
		s.pending[gitRepo] = map[string]status.LiveReport{}
	}
	for k, r := range batch {
		if _, newer := s.pending[gitRepo][k]; !newer {
			s.pending[gitRepo][k] = r
		}
	}
}
