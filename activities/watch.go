package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// WatchInput asks a cluster's watch to follow the releases of every
// GitRepo that runs some there.
type WatchInput struct {
	Cluster string              `json:"cluster"`
	Sets    []protocol.WatchSet `json:"sets"`
	// Unreachable is what the cluster's workflow believes of its contact:
	// the watch reports a change of it (probeContact).
	Unreachable bool `json:"unreachable,omitempty"`
	// Token names this watch in its contact reports.
	Token string `json:"token,omitempty"`
}

// WatchRun is how long one Watch runs before it returns for its workflow
// to start it again (its activity's StartToClose is longer).
const WatchRun = 50 * time.Minute

// watchHeartbeat is how often Watch heartbeats.
const watchHeartbeat = 5 * time.Second

// Signaller sends a signal to a workflow (a Temporal client's
// SignalWorkflow, bound to the current run).
type Signaller func(ctx context.Context, workflowID, signal string, arg any) error

// Watch keeps the cluster matching Git: it watches the releases in
// in.Sets (see internal/drift), reports their readiness and drift to
// their GitRepos as SignalLive signals, and corrects drift where
// correctDrift is on. It runs until the workflow cancels it, its worker
// stops, or WatchRun passes, heartbeating meanwhile. The cluster's
// monitor outlives it in the worker (drift.Watches): the next Watch, which
// the workflow starts as soon as the sets change, hands it the new sets.
// In a restarted worker the watch re-reads everything and corrects only
// what still differs.
func (c *ClusterActivities) Watch(ctx context.Context, in WatchInput) error {
	k, err := c.Clusters.Connect(in.Cluster)
	if err != nil {
		return err
	}
	if c.Signal == nil {
		return fmt.Errorf("cluster %s: this worker cannot report drift (no Temporal client)", in.Cluster)
	}
	cfg := drift.Config{Cluster: k.Name(), Getter: k.Getter, Deployer: c.Deployer, Logger: c.Logger,
		Report: func(ctx context.Context, gitRepo string, reports []status.LiveReport) error {
			c.liveOnce.Do(func() { c.live = newLiveBatcher(c.Signal, liveBatchDelay) })
			err := c.live.send(ctx, ParseGitRepoRef(gitRepo).WorkflowID(), status.LiveSignal{Cluster: k.Name(), Reports: reports})
			var gone *serviceerror.NotFound
			if errors.As(err, &gone) {
				return nil // the GitRepo was deleted: nobody to tell
			}
			return err
		}}
	run, cancel := context.WithTimeout(ctx, WatchRun)
	defer cancel()
	go func() {
		t := time.NewTicker(watchHeartbeat)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-run.Done():
				return
			case <-t.C:
			}
		}
	}()
	go c.probeContact(run, defaultContactProbe, k, in.Unreachable, in.Token)
	scheduled := activity.GetInfo(ctx).ScheduledTime
	if err := c.watches.Follow(run, cfg, k.Identity(), scheduled, c.watchTargets(ctx, in)); err != nil && run.Err() == nil {
		return err
	}
	return ctx.Err() // nil when WatchRun passed
}

// watchTargets reads each watched release's drift and readiness settings
// from the content store. Settings that cannot be read leave the release
// watched with none, and say why in its reports.
func (c *ClusterActivities) watchTargets(ctx context.Context, in WatchInput) []drift.Target {
	var out []drift.Target
	for _, set := range in.Sets {
		ref := ParseGitRepoRef(set.GitRepo)
		for _, r := range set.Releases {
			t := drift.Target{GitRepo: set.GitRepo, Bundle: r.Bundle, Release: r.Release, Namespace: r.Namespace,
				DeploymentID: r.DeploymentID, Owner: ownerOf(ref)}
			opts, err := c.options(ctx, RefillInput{GitRepo: ref, Bundle: r.Bundle,
				Cluster: in.Cluster, OptionsHash: r.OptionsKey})
			if err == nil {
				err = settings(&t, opts)
			}
			if err != nil {
				t.Error = fmt.Sprintf("drift settings of bundle %s unavailable: %v", r.Bundle, err)
			}
			out = append(out, t)
		}
	}
	return out
}

// settings fills in t's drift and readiness settings from opts.
func settings(t *drift.Target, opts bundle.Options) error {
	t.Ready = render.ReadyOptions(opts)
	t.Correct, t.Windows = opts.CorrectDrift, opts.CorrectionWindows
	t.ValuesFrom = valuesRefs(opts, t.Namespace)
	if opts.Helm != nil {
		t.MaxHistory = opts.Helm.MaxHistory
	}
	if opts.Diff == nil {
		return nil
	}
	rules, err := drift.CompileRules(opts.Diff.ComparePatches)
	if err != nil {
		return fmt.Errorf("diff.%w", err)
	}
	t.Rules = rules
	return nil
}
