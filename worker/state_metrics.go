package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// How the state collector reads the GitRepos: a scrape within
// stateCacheTTL of the last read is served from it; each status query may
// take stateQueryTimeout, stateQueries of them at once, and one read
// stateReadTimeout in all.
const (
	stateCacheTTL     = 10 * time.Second
	stateQueryTimeout = 2 * time.Second
	stateQueries      = 8
	stateReadTimeout  = 8 * time.Second
)

// The gauges of the state collector, as Fleet exports them per GitRepo,
// bundle and cluster.
var (
	gitRepoDeploymentsDesc = prometheus.NewDesc("flotilla_gitrepo_bundledeployments",
		"Bundle deployments of a GitRepo, by state.", []string{"namespace", "gitrepo", "state"}, nil)
	bundleDeploymentsDesc = prometheus.NewDesc("flotilla_bundle_bundledeployments",
		"Bundle deployments of a bundle of a GitRepo, by state.", []string{"namespace", "gitrepo", "bundle", "state"}, nil)
	gitRepoResourcesDesc = prometheus.NewDesc("flotilla_gitrepo_resources",
		"Objects of a GitRepo's deployments, by state (desiredReady: all of them).", []string{"namespace", "gitrepo", "state"}, nil)
	clusterStateDesc = prometheus.NewDesc("flotilla_cluster_state",
		"1 for the worst state of a cluster's bundle deployments over all GitRepos, 0 for the other states.",
		[]string{"cluster", "state"}, nil)
)

// resourceStates names the resource counts flotilla_gitrepo_resources
// exports, with Fleet's names.
var resourceStates = []struct {
	name  string
	count func(status.ResourceCounts) int
}{
	{"ready", func(c status.ResourceCounts) int { return c.Ready }},
	{"notReady", func(c status.ResourceCounts) int { return c.NotReady }},
	{"missing", func(c status.ResourceCounts) int { return c.Missing }},
	{"modified", func(c status.ResourceCounts) int { return c.Modified }},
	{"orphaned", func(c status.ResourceCounts) int { return c.Orphaned }},
	{"waitApplied", func(c status.ResourceCounts) int { return c.WaitApplied }},
	{"unknown", func(c status.ResourceCounts) int { return c.Unknown }},
	{"desiredReady", func(c status.ResourceCounts) int { return c.DesiredReady }},
}

// stateSample is one gauge value of the state collector.
type stateSample struct {
	desc   *prometheus.Desc
	labels []string
	value  float64
}

// stateSamples converts GitRepo statuses into the collector's gauges: per
// GitRepo and per bundle the deployments in each of status.States (zeros
// included), per GitRepo its ResourceCounts, and per cluster 1 for its
// worst state over every GitRepo and 0 for the others. GitRepos come out
// in the order given, bundles and clusters sorted.
func stateSamples(repos []status.GitRepo) []stateSample {
	var out []stateSample
	worst := map[string]status.State{}
	for _, r := range repos {
		out = append(out, stateCountSamples(gitRepoDeploymentsDesc, status.CountStates(r.Deployments), r.Namespace, r.Name)...)
		for _, name := range bundleNames(r.Deployments) {
			deps := slices.DeleteFunc(slices.Clone(r.Deployments), func(d status.Deployment) bool { return d.Bundle != name })
			out = append(out, stateCountSamples(bundleDeploymentsDesc, status.CountStates(deps), r.Namespace, r.Name, name)...)
		}
		for _, s := range resourceStates {
			out = append(out, stateSample{gitRepoResourcesDesc, []string{r.Namespace, r.Name, s.name}, float64(s.count(r.ResourceCounts))})
		}
		for _, d := range r.Deployments {
			if w, seen := worst[d.Cluster]; !seen || d.State.Rank() > w.Rank() {
				worst[d.Cluster] = d.State
			}
		}
	}
	clusters := make([]string, 0, len(worst))
	for c := range worst {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	for _, c := range clusters {
		for _, s := range status.States {
			v := 0.0
			if s == worst[c] {
				v = 1
			}
			out = append(out, stateSample{clusterStateDesc, []string{c, string(s)}, v})
		}
	}
	return out
}

// stateCountSamples is one sample of desc per state, labelled with labels
// and the state.
func stateCountSamples(desc *prometheus.Desc, counts status.StateCounts, labels ...string) []stateSample {
	out := make([]stateSample, 0, len(status.States))
	for _, s := range status.States {
		out = append(out, stateSample{desc, append(slices.Clone(labels), string(s)), float64(counts.Get(s))})
	}
	return out
}

// bundleNames returns the distinct bundles of deps, sorted.
func bundleNames(deps []status.Deployment) []string {
	names := make([]string, 0, len(deps))
	for _, d := range deps {
		names = append(names, d.Bundle)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// stateCollector exports the state of every running GitRepo on each
// scrape, read at most once per ttl.
type stateCollector struct {
	// read returns the statuses of the running GitRepos, and how many
	// could not be read.
	read   func(ctx context.Context) ([]status.GitRepo, int)
	ttl    time.Duration
	now    func() time.Time
	errors prometheus.Counter

	mu      sync.Mutex
	readAt  time.Time
	samples []stateSample
}

func newStateCollector(read func(ctx context.Context) ([]status.GitRepo, int)) *stateCollector {
	return &stateCollector{read: read, ttl: stateCacheTTL, now: time.Now,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_gitrepo_scrape_errors_total",
			Help: "GitRepos whose status could not be read for the state metrics, and failed listings of them.",
		})}
}

// Describe implements prometheus.Collector.
func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gitRepoDeploymentsDesc, bundleDeploymentsDesc, gitRepoResourcesDesc, clusterStateDesc} {
		ch <- d
	}
	s.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it reads the GitRepos unless
// the last read is younger than the ttl; concurrent scrapes share a read.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	if s.readAt.IsZero() || s.now().Sub(s.readAt) >= s.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), stateReadTimeout)
		repos, failed := s.read(ctx)
		cancel()
		s.errors.Add(float64(failed))
		s.samples, s.readAt = stateSamples(repos), s.now()
	}
	samples := s.samples
	s.mu.Unlock()
	for _, m := range samples {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, m.value, m.labels...)
	}
	s.errors.Collect(ch)
}

// readGitRepos returns a reader of the running GitRepos' statuses through
// c: it lists the GitRepo workflows and queries each, stateQueries at a
// time, each within stateQueryTimeout. Failed queries, and a failed
// listing, count as failures; the GitRepos read still count.
func readGitRepos(c client.Client, logger *zap.Logger) func(ctx context.Context) ([]status.GitRepo, int) {
	return func(ctx context.Context) ([]status.GitRepo, int) {
		var ids []string
		failed := 0
		err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfTypes(protocol.GitRepoWorkflow, protocol.HelmOpWorkflow), func(id string) error {
			ids = append(ids, id)
			return nil
		})
		if err != nil {
			logger.Warn("State metrics: could not list GitRepos", zap.Error(err))
			failed++
		}
		repos := make([]*status.GitRepo, len(ids))
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(stateQueries)
		for i, id := range ids {
			g.Go(func() error {
				st, err := queryGitRepo(ctx, c, id)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					logger.Debug("State metrics: could not query a GitRepo", zap.String("workflowID", id), zap.Error(err))
					failed++
					return nil
				}
				repos[i] = &st
				return nil
			})
		}
		_ = g.Wait() // the goroutines return no error
		return derefAll(repos), failed
	}
}

// queryGitRepo runs the status query of GitRepo workflow id.
func queryGitRepo(ctx context.Context, c client.Client, id string) (status.GitRepo, error) {
	ctx, cancel := context.WithTimeout(ctx, stateQueryTimeout)
	defer cancel()
	var st status.GitRepo
	v, err := c.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err == nil && len(st.Conditions) == 0 { // a worker that does not Finish
		st.Finish()
	}
	return st, err
}

func derefAll(repos []*status.GitRepo) []status.GitRepo {
	out := make([]status.GitRepo, 0, len(repos))
	for _, r := range repos {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out
}

// exportStateMetrics registers the state collector, reading through c, on
// the default registry served on /metrics. It reads nothing until a scrape.
func exportStateMetrics(c client.Client, logger *zap.Logger) {
	if err := prometheus.DefaultRegisterer.Register(newStateCollector(readGitRepos(c, logger))); err != nil {
		logger.Warn("Could not export the GitRepo state metrics", zap.Error(err))
	}
}
