package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/kubenative"
)

// managementFlags configure the Kubernetes-native mode: Fleet's resources
// served from a management cluster (internal/kubenative).
type managementFlags struct {
	Kubeconfig    string
	InCluster     bool
	Namespace     string
	LeaseDuration time.Duration
}

// defaultManagementNamespace is where the Lease lives without
// --management-namespace and $POD_NAMESPACE.
const defaultManagementNamespace = "flotilla-system"

func (f *managementFlags) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "management-kubeconfig", "", "kubeconfig of a management cluster whose fleet.cattle.io GitRepos, HelmOps, Clusters, ClusterGroups, "+
		"ClusterRegistrationTokens, GitRepoRestrictions and Policies this controller serves (Kubernetes-native mode)")
	fs.BoolVar(&f.InCluster, "management-in-cluster", false, "serve the management cluster this pod runs in (its service account), as --management-kubeconfig does")
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = defaultManagementNamespace
	}
	fs.StringVar(&f.Namespace, "management-namespace", ns, "namespace of the management cluster holding the Lease "+kubenative.LeaseName+
		" (only its holder serves the management cluster); default $POD_NAMESPACE, else "+defaultManagementNamespace)
	fs.DurationVar(&f.LeaseDuration, "management-lease-duration", 15*time.Second, "how long a standby replica waits before it takes over from a leader that stopped renewing the Lease")
}

func (f *managementFlags) enabled() bool { return f.Kubeconfig != "" || f.InCluster }

func (f *managementFlags) validate() error {
	switch {
	case f.Kubeconfig != "" && f.InCluster:
		return errors.New("--management-kubeconfig and --management-in-cluster are mutually exclusive")
	case f.enabled() && f.Namespace == "":
		return errors.New("--management-namespace must not be empty")
	case f.enabled() && f.LeaseDuration < time.Second:
		return errors.New("--management-lease-duration must be at least 1s")
	}
	return nil
}

func (f *managementFlags) restConfig() (*rest.Config, error) {
	if f.InCluster {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--management-in-cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--management-kubeconfig: %w", err)
	}
	return cfg, nil
}

// startManagement serves the management cluster, when one is configured,
// until ctx ends: Secrets are sealed to this controller's own newest key.
func startManagement(ctx context.Context, f managementFlags, c client.Client, queue string, s *activities.Sealing,
	reg kubenative.Registration, logger *zap.Logger) error {
	if !f.enabled() {
		return nil
	}
	rc, err := f.restConfig()
	if err != nil {
		return err
	}
	cfg := kubenative.Config{REST: rc, Temporal: c, TaskQueue: queue, Sealer: applier.KeySealer{Key: s.Opener.Newest()},
		Logger: logger.Named("management"), Namespace: f.Namespace, LeaseDuration: f.LeaseDuration, Registration: reg}
	if err := cfg.Validate(); err != nil {
		return err
	}
	go func() {
		if err := kubenative.Run(ctx, cfg); err != nil {
			cfg.Logger.Error("The management controller stopped", zap.Error(err))
		}
	}()
	return nil
}

// registration is where the agents of ClusterRegistrationTokens register:
// the gateway when this controller serves one, else its Temporal frontend
// (empty in dev mode, whose frontend only this host reaches).
func (o *options) registration() kubenative.Registration {
	if a := o.Gateway.address(); a != "" {
		return kubenative.Registration{Address: a, Namespace: o.Temporal.Namespace, Gateway: true}
	}
	return kubenative.Registration{Address: o.Temporal.Address, Namespace: o.Temporal.Namespace}
}
