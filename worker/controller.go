package main

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/workflows"
)

// stores are the worker's on-disk state under --state-dir.
type stores struct {
	clusters *cluster.Store
	secrets  *cluster.SecretStore
	content  *content.Store
	git      *gitsource.Cache
	charts   *chartfetch.Fetcher
}

func openStores(dir string, mirrors map[string]string) (*stores, error) {
	cs, err := content.New(filepath.Join(dir, "content"))
	if err != nil {
		return nil, err
	}
	return &stores{
		clusters: cluster.NewStore(filepath.Join(dir, "clusters")),
		secrets:  cluster.NewSecretStore(filepath.Join(dir, "secrets")),
		content:  cs,
		git:      gitsource.NewCache(filepath.Join(dir, "git")),
		charts:   &chartfetch.Fetcher{CacheDir: filepath.Join(dir, "charts"), Mirrors: mirrors},
	}, nil
}

// registerController registers the workflows and the controller's
// activities on the controller's worker.
func registerController(w worker.Worker, c client.Client, st *stores, logger *zap.Logger) {
	w.RegisterWorkflow(workflows.GitRepoWorkflow)
	w.RegisterWorkflow(workflows.RolloutWorkflow)
	w.RegisterWorkflow(workflows.ClusterWorkflow)
	w.RegisterWorkflow(workflows.ClusterGroupWorkflow)
	w.RegisterActivity(&activities.Activities{Client: c, Secrets: st.secrets, Content: st.content, Git: st.git, Charts: st.charts, Logger: logger})
}

// clusterQueues serves, in push mode, the task queue of every cluster
// whose kubeconfig is in the store: one small worker per cluster, started
// when `flotilla cluster add` stores a kubeconfig and stopped when
// `flotilla cluster remove` deletes it.
type clusterQueues struct {
	client   client.Client
	st       *stores
	deployer *deployer.Deployer
	logger   *zap.Logger
	maxActs  int

	mu      sync.Mutex
	workers map[string]worker.Worker
}

func newClusterQueues(c client.Client, st *stores, logger *zap.Logger, maxActs int) *clusterQueues {
	return &clusterQueues{client: c, st: st, logger: logger, maxActs: maxActs,
		deployer: deployer.New(deployer.Options{Logger: logger.Named("helm")}),
		workers:  map[string]worker.Worker{}}
}

// run syncs the workers with the store until ctx ends, then stops them.
func (q *clusterQueues) run(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		q.sync()
		select {
		case <-ctx.Done():
			q.stopAll()
			return
		case <-tick.C:
		}
	}
}

func (q *clusterQueues) sync() {
	names, err := q.st.clusters.Names()
	if err != nil {
		q.logger.Warn("Cannot list cluster kubeconfigs", zap.Error(err))
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
		if _, ok := q.workers[name]; ok {
			continue
		}
		w := q.start(name)
		if w != nil {
			q.workers[name] = w
		}
	}
	for name, w := range q.workers {
		if !want[name] {
			w.Stop()
			delete(q.workers, name)
			q.logger.Info("Stopped serving cluster", zap.String("cluster", name))
		}
	}
}

func (q *clusterQueues) start(name string) worker.Worker {
	queue := protocol.ClusterQueue(name)
	w := worker.New(q.client, queue, worker.Options{
		DisableWorkflowWorker:              true,
		MaxConcurrentActivityExecutionSize: q.maxActs,
	})
	w.RegisterActivity(&activities.ClusterActivities{
		Cluster:  name,
		Config:   func() (*rest.Config, error) { return q.st.clusters.RESTConfig(name) },
		Deployer: q.deployer,
		Content:  q.st.content,
		Logger:   q.logger,
	})
	if err := w.Start(); err != nil {
		q.logger.Error("Cannot serve cluster", zap.String("cluster", name), zap.String("taskQueue", queue), zap.Error(err))
		return nil
	}
	q.logger.Info("Serving cluster", zap.String("cluster", name), zap.String("taskQueue", queue))
	return w
}

func (q *clusterQueues) stopAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for name, w := range q.workers {
		w.Stop()
		delete(q.workers, name)
	}
}
