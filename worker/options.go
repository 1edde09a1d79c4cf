package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/devserver"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/logging"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// defaultTaskQueue is the controller's task queue.
const defaultTaskQueue = protocol.DefaultTaskQueue

// options is the worker's whole configuration, parsed once in main.
type options struct {
	Temporal temporalx.ClientOptions
	Dev      bool
	DevSrv   devserver.Options
	Log      logging.Options

	// ChartMirrors are FROM=TO URL prefix rewrites for remote charts.
	ChartMirrors []string
	// Registry carries rendered bundles to agents.
	Registry registryFlags
	// SealKeys is the keyring directory of the controllers' private
	// sealing keys (default <state-dir>/seal-keys).
	SealKeys string
	// AgentDefaults is the file of defaults for agents the controller
	// installs.
	AgentDefaults string
	HTTPListen    string
	// Pprof serves Go's profiles under /debug/pprof/ on HTTPListen.
	Pprof   bool
	Webhook webhookFlags
	// Gateway serves the agents' gateway (--gateway-listen).
	Gateway gatewayFlags
	// Limits bound what repositories and charts may make the controller
	// read (--max-file-size and others).
	Limits limitFlags
	// Management serves Fleet's resources from a management cluster
	// (--management-kubeconfig, --management-in-cluster).
	Management managementFlags
	// Codec configures the payload codec endpoint served on HTTPListen
	// when Temporal.PayloadKeys is set.
	Codec codecFlags
	// Git configures reaching Git remotes (--ssh-known-hosts).
	Git gitFlags

	// Retry paces the retries of deployments that failed.
	Retry rollout.Backoff
	// PickupTimeout: how long a rollout waits for a cluster to take up its
	// work.
	PickupTimeout time.Duration
	// DeletionGuard and DeletionGuardMin: --deletion-guard and
	// --deletion-guard-min (rollout.DeletionGuard).
	DeletionGuard    string
	DeletionGuardMin int

	TaskQueue                  string
	MaxConcurrentActivities    int
	MaxConcurrentWorkflowTasks int
}

func (o *options) bindFlags(fs *pflag.FlagSet) {
	o.Temporal.BindFlags(fs)
	fs.BoolVar(&o.Dev, "dev", false, "start an embedded Temporal server with Web UI (the default when --temporal-address is empty)")
	fs.StringVar(&o.DevSrv.StateDir, "state-dir", devserver.DefaultStateDir, "cache directory (Git clones, charts, rendered bundles; deleting it loses nothing when --seal-keys is set) and, with --dev, the embedded server's database")
	fs.StringVar(&o.SealKeys, "seal-keys", "", "directory of the controllers' private sealing keys, one file per key named by its ID (a mounted Secret; every replica needs the same); kubeconfigs and secrets reach controllers through Temporal sealed to the newest. Default: <state-dir>/seal-keys, generated on first start")
	fs.StringVar(&o.DevSrv.Listen, "dev-listen", devserver.DefaultListen, "host:port of the embedded Temporal frontend (with --dev)")
	fs.StringVar(&o.DevSrv.UIListen, "ui-listen", devserver.DefaultUIListen, `host:port of the embedded Temporal Web UI; "" disables it (with --dev)`)
	fs.StringVar(&o.TaskQueue, "task-queue", defaultTaskQueue, "Temporal task queue of the controller")
	fs.IntVar(&o.MaxConcurrentActivities, "max-concurrent-activities", 200, "activities this worker runs at once (raise for large fleets)")
	fs.IntVar(&o.MaxConcurrentWorkflowTasks, "max-concurrent-workflow-tasks", 100, "workflow tasks this worker runs at once")
	fs.StringArrayVar(&o.ChartMirrors, "chart-mirror", nil, "fetch remote Helm charts whose URL starts with FROM from TO instead (air-gapped mirrors): FROM=TO, repeatable")
	o.Registry.bindFlags(fs, "needed by agents that do not share this host's state dir")
	fs.StringVar(&o.AgentDefaults, "agent-defaults", "", "YAML file of defaults for agents installed with `cluster add --install-agent` (image, Temporal address, tolerations, resources, ...)")
	fs.DurationVar(&o.Retry.Initial, "retry-backoff", rollout.DefaultBackoffInitial, "wait before retrying a bundle that failed on a cluster (ErrApplied) or a cluster that refused the credentials; doubles with each failure in a row")
	fs.DurationVar(&o.Retry.Max, "retry-backoff-max", rollout.DefaultBackoffMax, "longest wait between retries of a failed bundle; it is retried at this pace for as long as it fails")
	fs.DurationVar(&o.PickupTimeout, "cluster-pickup-timeout", rollout.DefaultPickupTimeout, "how long a rollout waits for a cluster to take up its work (an agent that is offline, an API server that does not answer) before it shows the cluster's deployments WaitApplied and goes on without it; the cluster is tried again on the failure backoff and gets the newest deployment once it is back")
	fs.StringVar(&o.DeletionGuard, "deletion-guard", fmt.Sprintf("%d%%", rollout.DefaultDeletionGuardPercent), "a rollout that would uninstall more than this share of a GitRepo's releases (and at least --deletion-guard-min) holds those uninstalls, deploys everything else and shows the DeletionHeld condition until `flotilla approve NAME --deletions`; \"off\" disables it. Deleting a GitRepo is never guarded")
	fs.IntVar(&o.DeletionGuardMin, "deletion-guard-min", rollout.DefaultDeletionGuardMin, "the deletion guard holds a rollout's uninstalls only when at least this many would go")
	fs.StringVar(&o.HTTPListen, "http-listen", "", `host:port serving /healthz, /readyz and /metrics ("" disables)`)
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --http-listen (go tool pprof http://ADDR/debug/pprof/profile)")
	o.Webhook.bindFlags(fs)
	o.Gateway.bindFlags(fs)
	o.Limits.bindFlags(fs)
	o.Codec.bindFlags(fs)
	o.Management.bindFlags(fs)
	o.Git.bindFlags(fs)
	o.Log.BindFlags(fs)
}

// gitFlags configure how the controller reaches Git remotes.
type gitFlags struct {
	// KnownHostsFile holds the SSH host keys of remotes whose Secret has
	// no known_hosts (a mounted ConfigMap); read on each use.
	KnownHostsFile string
	// InsecureSkipHostKeyChecks accepts any SSH host key (Fleet's name).
	InsecureSkipHostKeyChecks bool
	// CacheWorktrees and CacheCloneTTL bound the shared Git cache under
	// --state-dir/git (gitsource.Cache MaxWorktrees and CloneTTL).
	CacheWorktrees int
	CacheCloneTTL  time.Duration
}

func (f *gitFlags) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.KnownHostsFile, "ssh-known-hosts", "", "known_hosts file of the SSH Git hosts (read on each use): a GitRepo's host key must match a line of its clientSecretName's known_hosts, else of this file; an unknown or changed key is refused")
	fs.BoolVar(&f.InsecureSkipHostKeyChecks, "insecure-skip-host-key-checks", false, "accept any SSH host key for every GitRepo (Fleet's insecureSkipHostKeyChecks): anyone between the controller and a Git host can then serve any commit; every GitRepo's status warns")

	fs.IntVar(&f.CacheWorktrees, "git-cache-worktrees", gitsource.DefaultMaxWorktrees, "checked-out commits kept under --state-dir/git besides those being rendered; the least recently used beyond it are removed after each new checkout")
	fs.DurationVar(&f.CacheCloneTTL, "git-cache-clone-ttl", gitsource.DefaultCloneTTL, "a repository's clone under --state-dir/git that nothing fetched or read for this long is removed (checked after each new checkout, and every half TTL, at most an hour); a later use clones it again")
}

func (f *gitFlags) validate() error {
	if f.CacheWorktrees < 1 || f.CacheCloneTTL <= 0 {
		return errors.New("--git-cache-worktrees must be ≥ 1 and --git-cache-clone-ttl positive")
	}
	return nil
}

// applyCache sets the cache bounds on the controller's Git cache, whose
// automatic prunes report failures to logger.
func (f *gitFlags) applyCache(c *gitsource.Cache, logger *zap.Logger) {
	if f.CacheWorktrees > 0 {
		c.MaxWorktrees = f.CacheWorktrees
	}
	if f.CacheCloneTTL > 0 {
		c.CloneTTL = f.CacheCloneTTL
	}
	c.OnPruneError = func(err error) { logger.Warn("Could not prune the Git cache", zap.Error(err)) }
}

// mirrors parses --chart-mirror.
func (o *options) mirrors() (map[string]string, error) {
	return chartfetch.ParseMirrors(o.ChartMirrors)
}

// deletionGuard parses --deletion-guard and --deletion-guard-min.
func (o *options) deletionGuard() (rollout.DeletionGuard, error) {
	on, percent, err := rollout.ParseDeletionGuardPercent(o.DeletionGuard)
	if err != nil {
		return rollout.DeletionGuard{}, err
	}
	if o.DeletionGuardMin < 1 {
		return rollout.DeletionGuard{}, errors.New("--deletion-guard-min must be ≥ 1")
	}
	return rollout.DeletionGuard{On: on, Percent: percent, Min: o.DeletionGuardMin}, nil
}

// rolloutPolicy is what rollouts get with their targets from the
// controller's flags (validated).
func (o *options) rolloutPolicy() rolloutPolicy {
	g, _ := o.deletionGuard()
	return rolloutPolicy{Retry: o.Retry, PickupTimeout: o.PickupTimeout, DeletionGuard: g}
}

// rolloutPolicy is the controller's configuration of rollouts.
type rolloutPolicy struct {
	Retry         rollout.Backoff
	PickupTimeout time.Duration
	DeletionGuard rollout.DeletionGuard
}

// devMode reports whether the worker starts its own Temporal server.
func (o *options) devMode() bool { return o.Dev || o.Temporal.Address == "" }

func (o *options) validate() error {
	var errs []error
	if o.Dev && o.Temporal.Address != "" {
		errs = append(errs, errors.New("--dev and --temporal-address are mutually exclusive"))
	}
	if o.TaskQueue == "" {
		errs = append(errs, errors.New("--task-queue must not be empty"))
	}
	errs = append(errs, o.Gateway.validate())
	if o.MaxConcurrentActivities < 1 || o.MaxConcurrentWorkflowTasks < 2 {
		errs = append(errs, errors.New("--max-concurrent-activities must be ≥ 1 and --max-concurrent-workflow-tasks ≥ 2"))
	}
	if _, err := o.mirrors(); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.deletionGuard(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.Management.validate(), o.Git.validate())
	errs = append(errs, o.Webhook.validate(), o.Codec.validate(o.Temporal.PayloadKeys, o.HTTPListen), o.Temporal.Validate())
	return errors.Join(errs...)
}

// codecFlags configure the payload codec endpoint, /codec/ on
// --http-listen, which the Temporal UI and CLI decode payloads with.
type codecFlags struct {
	TokenFile   string
	CORSOrigins []string
}

func (f *codecFlags) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.TokenFile, "codec-token-file", "", "file holding the bearer token callers of the payload codec endpoint (/codec/ on --http-listen) must send; without it (and outside --dev) no codec endpoint is served")
	fs.StringArrayVar(&f.CORSOrigins, "codec-cors-origin", nil, `browser origin (scheme://host:port, e.g. your Temporal UI's, or "*") allowed to call the codec endpoint; repeatable (--dev adds the embedded UI's)`)
}

func (f *codecFlags) validate(payloadKeys, httpListen string) error {
	set := f.TokenFile != "" || len(f.CORSOrigins) > 0
	switch {
	case set && payloadKeys == "":
		return errors.New("--codec-token-file and --codec-cors-origin configure the payload codec endpoint, which needs --payload-keys")
	case set && httpListen == "":
		return errors.New("--codec-token-file and --codec-cors-origin configure the payload codec endpoint, which is served on --http-listen")
	}
	return nil
}
