package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	"github.com/flotilla-gitops/flotilla/internal/agentcfg"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// AgentActivities install and upgrade the agents of clusters added with
// --install-agent. Only the controller registers them: they need the
// cluster's kubeconfig and the controller's agent defaults.
type AgentActivities struct {
	// Config returns a cluster's REST config from the kubeconfig store.
	Config   func(cluster string) (*rest.Config, error)
	Deployer *deployer.Deployer
	Defaults agentcfg.Defaults
	// Controller holds the controller's own settings, the fallbacks.
	Controller agentcfg.Controller
	// Chart is the flotilla-agent chart, ChartDigest its content hash.
	Chart       *chart.Chart
	ChartDigest string
	Logger      *zap.Logger
	// Credential issues a cluster's gateway credential; required when
	// agents reach the controllers through the gateway
	// (agentcfg.ViaGateway).
	Credential func(ctx context.Context, cluster string) (string, error)

	hashOnce     sync.Once
	defaultsHash string
}

// EnsureAgentInput names the cluster and its own agent settings.
type EnsureAgentInput struct {
	Cluster        string                `json:"cluster"`
	KubeconfigHash string                `json:"kubeconfigHash,omitempty"`
	Config         *protocol.AgentConfig `json:"config,omitempty"`
}

// EnsureAgentResult reports the agent's deployment ID and whether this
// call deployed it.
type EnsureAgentResult struct {
	DeploymentID string `json:"deploymentID"`
	DefaultsHash string `json:"defaultsHash"`
	Deployed     bool   `json:"deployed,omitempty"`
	Revision     int    `json:"revision,omitempty"`
	// RemovedStatefulSet is set when an older install's StatefulSet was
	// deleted.
	RemovedStatefulSet bool `json:"removedStatefulSet,omitempty"`
	// RemovedFrom lists namespaces an earlier install of the agent was
	// uninstalled from (its namespace changed).
	RemovedFrom []string `json:"removedFrom,omitempty"`
}

// AgentDefaultsHash identifies the controller's agent defaults. (A
// function, not a method: every exported method of AgentActivities is
// registered as an activity.)
// It is computed once per process: files behind it (a mounted CA) that
// change later take effect at the next controller start, not in a loop.
func AgentDefaultsHash(a *AgentActivities) string {
	a.hashOnce.Do(func() { a.defaultsHash = agentcfg.DefaultsHash(a.Defaults, a.Controller, a.ChartDigest) })
	return a.defaultsHash
}

// EnsureAgent makes the cluster run its agent at the hash of the agent's
// effective configuration. The release is the agent's Helm release; an
// agent already at that hash is left alone, so this is safe to call on
// every controller start. A StatefulSet left by an older install is
// removed first: two agents must not poll one queue with different
// configurations.
func (a *AgentActivities) EnsureAgent(ctx context.Context, in EnsureAgentInput) (EnsureAgentResult, error) {
	defer keepAlive(ctx)()
	ctrl := a.Controller
	if agentcfg.ViaGateway(a.Defaults, ctrl) && a.Credential != nil {
		cred, err := a.Credential(ctx, in.Cluster)
		if err != nil {
			return EnsureAgentResult{}, fmt.Errorf("cluster %s: issue the agent's gateway credential: %w", in.Cluster, err)
		}
		ctrl.Credential = cred
	}
	eff, secrets, err := agentcfg.Resolve(in.Cluster, a.Defaults, ctrl, in.Config, a.ChartDigest)
	if err != nil {
		return EnsureAgentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidAgentConfig, nil)
	}
	out := EnsureAgentResult{DeploymentID: eff.Hash(), DefaultsHash: AgentDefaultsHash(a)}
	cfg, err := a.Config(in.Cluster)
	if err != nil {
		return out, fmt.Errorf("cluster %s: %w", in.Cluster, err)
	}
	if out.RemovedStatefulSet, err = removeStatefulSet(ctx, cfg, eff.Namespace); err != nil {
		return out, fmt.Errorf("cluster %s: remove the agent StatefulSet of an older install: %w", in.Cluster, err)
	}
	getter, err := deployer.NewRESTClientGetter(cfg, eff.Namespace)
	if err != nil {
		return out, fmt.Errorf("cluster %s: %w", in.Cluster, err)
	}
	if out.RemovedFrom, err = a.removeMoved(ctx, getter, in.Cluster, eff.Namespace); err != nil {
		return out, err
	}
	by := deployedBy(ctx)
	res, err := a.Deployer.Deploy(ctx, getter, deployer.Release{
		Name: agentcfg.ReleaseName, Namespace: eff.Namespace, Chart: a.Chart,
		Values: eff.Values(secrets), DeploymentID: out.DeploymentID, Description: by, Owner: agentOwner(in.Cluster),
	})
	if err != nil {
		if errors.Is(err, deployer.ErrInvalidRelease) {
			return out, temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %s: agent: %v", in.Cluster, err), ErrTypeInvalidAgentConfig, nil)
		}
		return out, fmt.Errorf("cluster %s: install agent: %w", in.Cluster, err)
	}
	// A revision an interrupted attempt of this activity recorded is this
	// call's deploy too.
	resumed := interrupted(res, by)
	out.Deployed, out.Revision = res.Changed || resumed, res.Revision
	fields := []zap.Field{zap.String("cluster", in.Cluster), zap.String("namespace", eff.Namespace),
		zap.String("deploymentID", out.DeploymentID), zap.Int("revision", res.Revision), zap.String("previous", res.Previous)}
	if res.Changed {
		a.Logger.Info("Deployed agent", fields...)
	} else if resumed {
		a.Logger.Info("Confirmed interrupted agent deploy", append(fields, zap.Int32("attempt", activity.GetInfo(ctx).Attempt))...)
	}
	return out, nil
}

// agentOwner is the owner of cluster's agent release: the controller's
// agent management, for that cluster.
func agentOwner(cluster string) deployer.Owner {
	return deployer.Owner("Flotilla agent of cluster " + cluster)
}

// removeMoved uninstalls the agent's release from every namespace but
// namespace: an agent whose namespace changed (per-cluster setting or the
// controller's defaults) must not leave the old one polling the same
// queue, and its cluster-scoped RBAC would make the new install fail.
// The old release goes first; its queue holds the work meanwhile.
func (a *AgentActivities) removeMoved(ctx context.Context, getter *deployer.RESTClientGetter, cluster, namespace string) ([]string, error) {
	// Only this cluster's agent: clusters registered on one API server
	// (virtual clusters) each have their own.
	found, err := a.Deployer.Namespaces(getter, agentcfg.ReleaseName, func(r *release.Release) bool {
		return r.Chart != nil && r.Chart.Metadata != nil && r.Chart.Metadata.Name == a.Chart.Metadata.Name &&
			r.Config["cluster"] == cluster
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: find earlier agent installs: %w", cluster, err)
	}
	var removed []string
	for _, ns := range found {
		if ns == namespace {
			continue
		}
		if err := a.Deployer.Uninstall(ctx, getter, ns, agentcfg.ReleaseName, agentOwner(cluster)); err != nil {
			return removed, fmt.Errorf("cluster %s: remove the agent from namespace %s before installing it in %s: %w", cluster, ns, namespace, err)
		}
		a.Logger.Info("Removed agent from its old namespace", zap.String("cluster", cluster),
			zap.String("namespace", ns), zap.String("newNamespace", namespace))
		removed = append(removed, ns)
	}
	return removed, nil
}

// removeStatefulSet deletes the agent StatefulSet an older install left.
func removeStatefulSet(ctx context.Context, cfg *rest.Config, namespace string) (bool, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, err
	}
	policy := metav1.DeletePropagationBackground
	err = cs.AppsV1().StatefulSets(namespace).Delete(ctx, agentcfg.ReleaseName, metav1.DeleteOptions{PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
