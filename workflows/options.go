package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// Timeouts and retries of the activities Flotilla's workflows run.
var (
	// gitOptions: ls-remote of a GitRepo's remote. Failures are reported in
	// status and retried on the next poll, so attempts are few.
	gitOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{activities.ErrTypeGitAuth, activities.ErrTypeRefNotFound, activities.ErrTypeSecretNotFound},
		},
	}
	// renderOptions: checkout and render of every bundle.
	renderOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second,
			MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalidBundle, activities.ErrTypeGitAuth,
				activities.ErrTypeRefNotFound, activities.ErrTypeSecretNotFound},
		},
	}
	// registryOptions: reading clusters and groups, notifying GitRepos.
	registryOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, MaximumInterval: 10 * time.Second},
	}
	// clusterOptions: deploy and cleanup on a cluster. On the controller's
	// queue a task nobody picks up fails on ScheduleToStart; the rollout
	// reports it and tries again. The limit is generous because a queue of
	// work is normal there: a 5,000-cluster rollout's deploys waited up to
	// a minute for a slot, and a 30 s limit turned that wait into 1,825
	// failed attempts, each retried. Agents' queues have no limit (see
	// onCluster).
	clusterOptions = workflow.ActivityOptions{
		ScheduleToStartTimeout: clusterQueueWait,
		StartToCloseTimeout:    15 * time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	}
	// watchSetsOptions: telling clusters what to watch, paced at 100 a
	// second (activities.SendWatchSets).
	watchSetsOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 3},
	}
	// waitReadyOptions: watching a cluster's resources become ready.
	waitReadyOptions = workflow.ActivityOptions{
		ScheduleToStartTimeout: clusterQueueWait,
		StartToCloseTimeout:    3 * time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	}
)

// clusterQueueWait bounds how long a push-mode cluster's work waits on
// the controller's queue for a worker.
const clusterQueueWait = 5 * time.Minute

// onCluster returns ctx with opts for an activity on cluster: on its
// agent's task queue in pull mode, on the controller's own queue (whose
// worker serves every push-mode cluster) otherwise.
func onCluster(ctx workflow.Context, cluster string, agent bool, opts workflow.ActivityOptions) workflow.Context {
	if agent {
		// An agent that is down (or offline) picks its work up when it is
		// back: the task waits in its queue, and the rollout counts the
		// cluster unavailable meanwhile. Nothing is lost or repeated.
		opts.TaskQueue = protocol.ClusterQueue(cluster)
		opts.ScheduleToStartTimeout = 0
	}
	return workflow.WithActivityOptions(ctx, opts)
}

// inlineClusterLimit is the most clusters a rollout works itself; above
// it cluster work runs in RolloutBatchWorkflow children of at most
// batchClusters clusters, so no run holds more than a few hundred pending
// activities or grows past a few thousand events.
const (
	inlineClusterLimit = 50
	batchClusters      = 100
	// Work for fewer than minBatchClusters clusters released while other
	// batches run waits up to batchCoalesce for more to join it.
	minBatchClusters = 10
	batchCoalesce    = time.Second
)

// signalClusterReport carries one cluster outcome of a batch to its
// rollout; signalClusterReports carries every outcome the batch gathered
// while its previous signal was in flight (versionBatchedReports).
const (
	signalClusterReport  = "clusterReport"
	signalClusterReports = "clusterReports"
)

// defaultReadyTimeout bounds the wait for readiness after a deploy when
// the strategy sets none; waitReadyGrace is the activity's slack beyond it.
const (
	defaultReadyTimeout = 5 * time.Minute
	waitReadyGrace      = 30 * time.Second
)

// historyLimit is the history length at which entity workflows continue
// as new, well before Temporal's 10k-event warning.
const historyLimit = 4000

// historyFull reports whether a run's history reached historyLimit, or
// Temporal suggests continuing as new.
func historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > historyLimit
}

// maxClusterAttempts bounds the deploy (and cleanup) attempts one rollout
// makes on an unreachable cluster: with retryBackoff about 10 minutes.
const maxClusterAttempts = 45

// retryBackoff is the pause before the n-th retry (0-based) of a cluster
// that could not be reached: 1s, 2s, 4s, ... up to 15s.
func retryBackoff(n int) time.Duration {
	d := time.Second << min(n, 4)
	return min(d, 15*time.Second)
}

// Workflow versions (workflow.GetVersion change IDs).
const (
	// versionPollBackoff: the poller waits for each check of the remote
	// before timing the next, so failures back off.
	versionPollBackoff = "poll-backoff"
	// versionRepoKeyAttr: GitRepo runs write the normalised repo key to
	// FlotillaRepoURL at their first check of the remote.
	versionRepoKeyAttr = "repo-key-search-attribute"
	// versionPerClusterOptions: rollouts compute options and deployment
	// IDs per cluster (TargetBundles) instead of per GitRepo (ListTargets).
	versionPerClusterOptions = "per-cluster-options"
	// versionRolloutStrategy: rollouts follow each bundle's rollout
	// strategy, dependsOn and approvals, and fan out through batches.
	versionRolloutStrategy = "rollout-strategy"
	// versionTypedOutcomes: deploys report a typed outcome per bundle;
	// bundles are retried on their own, failures with a backoff kept in
	// the inventory.
	versionTypedOutcomes = "typed-outcomes"
	// versionFailureRetry: GitRepo runs start a rollout when the backoff
	// of a failed deployment is over.
	versionFailureRetry = "failure-retry"
	// versionCoalesceClusters: cluster changes during a rollout supersede
	// it once they pause (clusterQuiet), not one by one.
	versionCoalesceClusters = "coalesce-cluster-changes"
	// versionWatchQueue: push-mode drift watches run on the controller's
	// watch queue (protocol.WatchQueue), not its own.
	versionWatchQueue = "watch-queue"
	// versionWatchSetsActivity: a GitRepo tells its clusters their watch
	// sets with one activity (activities.SendWatchSets), not a signal
	// command per cluster.
	versionWatchSetsActivity = "watch-sets-activity"
	// versionVouchedNoop: a rollout does not deploy a cluster again whose
	// watch vouches that it runs the deployment ID, all Ready, no drift.
	versionVouchedNoop = "vouched-noop"
	// versionBatchedReports: a batch sends its rollout the cluster
	// outcomes gathered while its last signal was in flight in one signal
	// (signalClusterReports), not a signal per cluster.
	versionBatchedReports = "batched-reports"
	// versionTargetingMemo: a ClusterWorkflow keeps its record as
	// targeting reads it in its memo (protocol.MemoTargeting), and its
	// notifications wait until visibility shows the change there.
	versionTargetingMemo = "targeting-memo"
	// versionLongLived: a GitRepo's loop follows loop.Decide: a poll that
	// finds nothing new starts no rollout, a retry waits for a running
	// rollout instead of superseding it, and the run continues as new on
	// its history budget also while a rollout runs (the rollout is
	// abandoned by the old run and reports to the new one).
	versionLongLived = "long-lived-loop"
	// versionTokenKeep: a registration token is used once a registration
	// succeeded, not when it began; a refused one leaves it usable.
	versionTokenKeep = "token-keep-refused"
	// versionWindowsGateEveryStart: deployment windows gate every unit's
	// start and every rollback, not only a partition's start.
	versionWindowsGateEveryStart = "windows-gate-every-start"
	// versionPickupTimeout: a cluster that leaves its work unanswered for
	// the controller's pickup timeout (an offline agent, an API server
	// that does not answer) is given up for the rollout, which goes on.
	versionPickupTimeout = "cluster-pickup-timeout"
	// versionNotifyOnReturn: a cluster whose agent comes back online
	// tells its GitRepos, which deploy what it missed at once.
	versionNotifyOnReturn = "notify-on-return"
	// versionDropRemoved: a superseded rollout asks which of the agent
	// clusters it still waits for were removed, and cancels their work
	// (clusterScopes) instead of waiting the pickup timeout out for a
	// queue no agent will serve again; its batches are told
	// (signalDropClusters).
	versionDropRemoved = "drop-removed-clusters"
	// versionContact: a cluster's workflow takes its drift watch's
	// contact reports (SignalContact), marks an agent whose watch stopped
	// heartbeating Offline without waiting for three missed heartbeats,
	// and tells the GitRepos that run releases on the cluster when it
	// loses and regains contact, so their status stops calling its
	// deployments Ready.
	versionContact = "cluster-contact"
	// versionAgentUpgradeWindows: an upgrade of a managed agent waits for
	// the cluster's agentUpgradeWindows.
	versionAgentUpgradeWindows = "agent-upgrade-windows"
	// versionResupersede: a cluster change while the GitRepo's rollout is
	// already superseded signals it again, so it looks again for removed
	// clusters whose queued work it still waits for (dropRemoved).
	versionResupersede = "resupersede-on-cluster-change"
	// versionFollowUnchanged: a commit that changes nothing the GitRepo
	// reads since the commit its running rollout rolls out does not
	// supersede that rollout; it becomes the GitRepo's commit when the
	// rollout ends as it should (GitRepoState.Follow).
	versionFollowUnchanged = "follow-unchanged"
	// versionFinishReported: a run that continues as new after its
	// rollout reported its result, but before the rollout closed,
	// finishes the rollout first. Before, the next run adopted it and
	// waited for a report that had come to this run: the GitRepo rolled
	// out nothing new until its adoption check (rolloutCheckInterval,
	// restarted by every run) found the rollout gone, and then counted
	// it as failed.
	versionFinishReported = "finish-reported-before-continue-as-new"
)

// rolloutCheckInterval is how often a GitRepo run that adopted a rollout
// from its previous run checks that the rollout still runs.
const rolloutCheckInterval = 5 * time.Minute

// signalRolloutReport carries a rollout's plan and result to its GitRepo
// (RolloutInput.ReportTo).
const signalRolloutReport = "rolloutReport"

// A burst of cluster changes (registrations, label edits) during a
// rollout supersedes it once no change came for clusterQuiet, and at the
// latest clusterMaxWait after the first: one re-target per burst, not
// one per cluster. A change while no rollout runs is acted on at once.
const (
	clusterQuiet   = time.Second
	clusterMaxWait = 5 * time.Second
)
