package main

import (
	"context"
	"path/filepath"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/deploy"
	"github.com/flotilla-gitops/flotilla/internal/agentcfg"
	"github.com/flotilla-gitops/flotilla/internal/buildinfo"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/workflows"
)

// stores are where the controller reads its state: the sealed
// kubeconfigs and secrets in Temporal (vault), and its caches under
// --state-dir.
type stores struct {
	sealing *activities.Sealing
	content *content.Store
	git     *gitsource.Cache
	charts  *chartfetch.Fetcher
	// limits bound the repository files renders read (limitFlags.apply).
	limits bundle.Limits
	// gitFlags: --ssh-known-hosts, --insecure-skip-host-key-checks and
	// the Git cache's bounds.
	gitFlags gitFlags
}

func openStores(dir string, mirrors map[string]string, registry registryFlags) (*stores, error) {
	cs, err := registry.openContent(dir)
	if err != nil {
		return nil, err
	}
	return &stores{
		content: cs,
		git:     gitsource.NewCache(filepath.Join(dir, "git")),
		charts:  &chartfetch.Fetcher{CacheDir: filepath.Join(dir, "charts"), Mirrors: mirrors},
	}, nil
}

// registerController registers the workflows, the controller's
// activities and, for clusters in push mode, the cluster activities on the
// controller's worker: one worker serves every cluster with a sealed
// kubeconfig, each call naming its cluster, so a fleet of thousands of
// clusters needs no worker (and no task queue poller) per cluster.
//
// The push-mode clusters' drift watches run on watches, a second worker
// on the watch queue (protocol.WatchQueue) whose slots are not limited by
// --max-concurrent-activities: each is a long-running activity, one per
// cluster, that must neither wait for a slot nor hold one a deploy needs.
// Both workers share one ClusterActivities, which keeps the clusters'
// monitors.
func registerController(w, watches worker.Worker, c client.Client, dc converter.DataConverter, st *stores, agents *activities.AgentActivities, policy rolloutPolicy, logger *zap.Logger) {
	w.RegisterWorkflow(workflows.GitRepoWorkflow)
	w.RegisterWorkflow(workflows.HelmOpWorkflow)
	w.RegisterWorkflow(workflows.RolloutWorkflow)
	w.RegisterWorkflow(workflows.RolloutBatchWorkflow)
	w.RegisterWorkflow(workflows.ClusterWorkflow)
	w.RegisterWorkflow(workflows.ClusterGroupWorkflow)
	w.RegisterWorkflow(workflows.ClusterTokenWorkflow)
	w.RegisterWorkflow(workflows.SecretWorkflow)
	w.RegisterWorkflow(workflows.ConfigMapWorkflow)
	w.RegisterWorkflow(workflows.PolicyWorkflow)
	w.RegisterWorkflow(workflows.NotificationsWorkflow)
	w.RegisterWorkflow(workflows.KeysWorkflow)
	w.RegisterWorkflow(workflows.ResealWorkflow)
	w.RegisterWorkflow(workflows.PreviewWorkflow)
	w.RegisterWorkflowWithOptions(workflows.PlanWorkflow, workflow.RegisterOptions{Name: plan.WorkflowName})
	w.RegisterActivity(agents)
	st.gitFlags.applyCache(st.git, logger)
	ctrl := &activities.Activities{Client: c, DataConverter: dc, Secrets: st.sealing.Vault, Sealing: st.sealing, Content: st.content, Git: st.git,
		KnownHostsFile: st.gitFlags.KnownHostsFile, InsecureSkipHostKeyChecks: st.gitFlags.InsecureSkipHostKeyChecks, Charts: st.charts, Limits: st.limits, Retry: policy.Retry, PickupTimeout: policy.PickupTimeout, DeletionGuard: policy.DeletionGuard, Logger: logger}
	w.RegisterActivity(ctrl)
	ca := &activities.ClusterActivities{
		Clusters:   cluster.NewConnections(cluster.ConnectionsOptions{Config: st.sealing.Vault.RESTConfig}),
		Deployer:   deployer.New(deployer.Options{Logger: logger.Named("helm"), ProtectedNamespaces: ownNamespace()}),
		Content:    st.content,
		Refill:     activities.Refill(ctrl), // content another controller rendered
		Logger:     logger,
		Signal:     signaller(c),
		Downstream: activities.VaultDownstream(st.sealing),
	}
	w.RegisterActivity(ca)
	watches.RegisterActivityWithOptions(ca.Watch, activity.RegisterOptions{Name: "Watch"})
	exportStateMetrics(c, logger) // GitRepo, bundle and cluster states on /metrics
}

// agentActivities builds the activities that install managed agents: the
// embedded flotilla-agent chart, the --agent-defaults file, and this
// controller's own connection settings as fallbacks.
func (o *options) agentActivities(st *stores, logger *zap.Logger) (*activities.AgentActivities, error) {
	defaults, err := agentcfg.Load(o.AgentDefaults)
	if err != nil {
		return nil, err
	}
	chrt, err := deploy.AgentChart()
	if err != nil {
		return nil, err
	}
	t := o.Temporal
	return &activities.AgentActivities{
		Config:   st.sealing.Vault.RESTConfig,
		Deployer: deployer.New(deployer.Options{Logger: logger.Named("helm"), ProtectedNamespaces: ownNamespace()}),
		Defaults: defaults,
		Controller: agentcfg.Controller{
			Version: buildinfo.Get().Version, TemporalAddress: t.Address, TemporalNamespace: t.Namespace,
			TLS: t.TLS || t.TLSCAFile != "" || t.TLSCertFile != "" || t.TLSServerName != "", TLSServerName: t.TLSServerName,
			TLSCAFile: t.TLSCAFile, TLSCertFile: t.TLSCertFile, TLSKeyFile: t.TLSKeyFile,
			APIKeyFile: t.APIKeyFile, APIKey: t.APIKey,
			RegistryURL: o.Registry.URL, RegistryPlainHTTP: o.Registry.PlainHTTP, RegistryCAFile: o.Registry.CAFile,
			RegistryUsername: o.Registry.Username, RegistryPassword: o.Registry.Password,
			PayloadKeys:    t.PayloadKeys,
			GatewayAddress: o.Gateway.address(), GatewayTLS: o.Gateway.TLSCert != "",
		},
		Chart:       chrt,
		ChartDigest: agentcfg.ChartDigest(chrt),
		Logger:      logger,
	}, nil
}

// announceAgentDefaults tells every cluster the hash of this controller's
// agent defaults. A cluster whose managed agent was deployed from the same
// hash does nothing, so restarting the controller redeploys no agent; a
// changed hash (new controller version, new defaults) makes each managed
// cluster compare its agent's effective configuration and upgrade it only
// if that changed.
func announceAgentDefaults(ctx context.Context, c client.Client, hash string, logger *zap.Logger) {
	sent := 0
	err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfType(protocol.ClusterWorkflow), func(id string) error {
		if err := c.SignalWorkflow(ctx, id, "", protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: hash}); err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // stopping
			}
			logger.Warn("Could not send agent defaults", zap.String("workflowID", id), zap.Error(err))
			return nil
		}
		sent++
		return nil
	})
	if err != nil && ctx.Err() == nil {
		logger.Warn("Could not list clusters to send agent defaults", zap.Error(err))
		return
	}
	if ctx.Err() == nil {
		logger.Info("Announced agent defaults", zap.Int("clusters", sent))
	}
}
