package main

import (
	"path/filepath"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
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

// registerController registers the workflows, the controller's
// activities and, for clusters in push mode, the cluster activities on the
// controller's worker: one worker serves every cluster whose kubeconfig is
// in the store, each call naming its cluster, so a fleet of thousands of
// clusters needs no worker (and no task queue poller) per cluster.
func registerController(w worker.Worker, c client.Client, st *stores, logger *zap.Logger) {
	w.RegisterWorkflow(workflows.GitRepoWorkflow)
	w.RegisterWorkflow(workflows.RolloutWorkflow)
	w.RegisterWorkflow(workflows.RolloutBatchWorkflow)
	w.RegisterWorkflow(workflows.ClusterWorkflow)
	w.RegisterWorkflow(workflows.ClusterGroupWorkflow)
	w.RegisterActivity(&activities.Activities{Client: c, Secrets: st.secrets, Content: st.content, Git: st.git, Charts: st.charts, Logger: logger})
	w.RegisterActivity(&activities.ClusterActivities{
		Config:   st.clusters.RESTConfig,
		Deployer: deployer.New(deployer.Options{Logger: logger.Named("helm")}),
		Content:  st.content,
		Logger:   logger,
	})
}
