package kubenative

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/fleetstatus"
)

// LeaseName is the coordination.k8s.io Lease the controller replicas
// elect their leader with: only its holder watches and writes.
const LeaseName = "flotilla-management"

// Config configures Run.
type Config struct {
	// REST reaches the management cluster. Required.
	REST *rest.Config
	// Temporal and TaskQueue are where resources are applied. Required.
	Temporal  client.Client
	TaskQueue string
	// Sealer seals the Secrets GitRepos and HelmOps reference. Required.
	Sealer applier.Sealer
	// Logger. Optional: default zap.NewNop().
	Logger *zap.Logger
	// Namespace holds the Lease. Required.
	Namespace string
	// LeaseDuration is how long another replica waits before it takes
	// over from a leader that stopped renewing. Optional: default 15s.
	LeaseDuration time.Duration
	// Identity names this replica in the Lease. Optional: default
	// hostname_pid.
	Identity string
	// Workers reconcile at once. Optional: default 3.
	Workers int
	// StatusInterval is the status writer's MinInterval. Optional:
	// default 2s.
	StatusInterval time.Duration
	// Registration is what the Secrets of ClusterRegistrationTokens tell
	// agents besides the token. Optional: default the token alone.
	Registration Registration
	// Resync lists every watched object again this often. Optional:
	// default 10m.
	Resync time.Duration
}

func (c *Config) applyDefaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.Identity == "" {
		host, _ := os.Hostname() // an empty host still leaves the pid
		c.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	if c.Workers <= 0 {
		c.Workers = 3
	}
	if c.Resync <= 0 {
		c.Resync = 10 * time.Minute
	}
}

// Validate reports what is missing.
func (c Config) Validate() error {
	var errs []error
	if c.REST == nil {
		errs = append(errs, errors.New("management cluster: no REST config"))
	}
	if c.Temporal == nil || c.TaskQueue == "" {
		errs = append(errs, errors.New("management cluster: no Temporal client or task queue"))
	}
	if c.Sealer == nil {
		errs = append(errs, errors.New("management cluster: no sealer"))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("management cluster: no namespace for the Lease"))
	}
	return errors.Join(errs...)
}

// Run serves Fleet's resources of the management cluster until ctx ends.
// Replicas elect a leader with the Lease LeaseName in cfg.Namespace; only
// the leader runs the informers, the reconcilers and the status writer,
// and stops them when it loses the Lease. Another replica takes over
// after cfg.LeaseDuration. Applies are idempotent (an unchanged spec is
// "unchanged" in its workflow), so a new leader simply applies every
// resource once again.
func Run(ctx context.Context, cfg Config) error {
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName, Namespace: cfg.Namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	deps := &Deps{Temporal: cfg.Temporal, TaskQueue: cfg.TaskQueue, Kube: kube, Dynamic: dyn, Logger: cfg.Logger, Sealer: cfg.Sealer,
		Registration: cfg.Registration}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(electionConfig(cfg, lock, func(lctx context.Context) {
			cfg.Logger.Info("Leading the management cluster's controllers", zap.String("lease", cfg.Namespace+"/"+LeaseName),
				zap.String("identity", cfg.Identity))
			leadUntilLost(lctx, cfg, deps)
		}))
		if err != nil {
			return fmt.Errorf("management cluster: leader election: %w", err)
		}
		le.Run(ctx) // returns once leadership is lost or ctx ends
		if ctx.Err() == nil {
			cfg.Logger.Warn("Lost the management Lease; standing by", zap.String("identity", cfg.Identity))
		}
	}
	return nil
}

// electionConfig derives the renew deadline and retry period from the
// lease duration, in client-go's default proportions (15s, 10s, 2s).
func electionConfig(cfg Config, lock resourcelock.Interface, lead func(context.Context)) leaderelection.LeaderElectionConfig {
	d := cfg.LeaseDuration
	return leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            LeaseName,
		LeaseDuration:   d,
		RenewDeadline:   d * 2 / 3,
		RetryPeriod:     d * 2 / 15,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: lead,
			OnStoppedLeading: func() {},
		},
	}
}

// leadUntilLost runs lead while this replica holds the Lease, starting it
// again after a failure (a discovery or informer error): a leader that
// gave up would hold the Lease and serve nothing.
func leadUntilLost(ctx context.Context, cfg Config, deps *Deps) {
	for {
		err := lead(ctx, cfg, deps)
		if ctx.Err() != nil {
			return
		}
		cfg.Logger.Error("The management controller failed; starting it again", zap.Error(err), zap.Duration("after", restartDelay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

// restartDelay is how long a leader waits before it starts a failed
// management controller again.
const restartDelay = 5 * time.Second

// lead runs the status writer and the reconcilers until ctx ends (the
// Lease is lost, or the worker stops).
func lead(ctx context.Context, cfg Config, base *Deps) error {
	d := *base
	d.Status = fleetstatus.NewWriter(fleetstatus.WriterConfig{Dynamic: d.Dynamic, Kube: d.Kube, Temporal: d.Temporal,
		Logger: cfg.Logger.Named("status"), MinInterval: cfg.StatusInterval})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Status.Run(ctx) // returns nil when ctx ends
	}()
	defer func() { <-done }()
	c, err := newController(&d, cfg.Resync)
	if err != nil {
		return err
	}
	return c.run(ctx, cfg.Workers)
}
