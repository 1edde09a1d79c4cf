package workflows

import (
	"fmt"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// GitRepoInput starts (or continues) a GitRepo's entity workflow.
type GitRepoInput struct {
	// GitRepoStart is what clients start the workflow with.
	protocol.GitRepoStart
	// State is carried across continue-as-new; nil on the first run.
	State *GitRepoState `json:"state,omitempty"`
}

// GitRepoState is everything a GitRepo workflow knows.
type GitRepoState struct {
	GitRepo *api.GitRepo `json:"gitRepo,omitempty"`
	// HelmOp is the applied HelmOp of a HelmOpWorkflow; GitRepo is then
	// what it rolls out as (api.HelmOp.AsGitRepo).
	HelmOp             *api.HelmOp         `json:"helmOp,omitempty"`
	Generation         int64               `json:"generation"`
	ObservedGeneration int64               `json:"observedGeneration"`
	Commit             string              `json:"commit,omitempty"`
	LatestCommit       string              `json:"latestCommit,omitempty"`
	Paused             bool                `json:"paused,omitempty"`
	Deleting           bool                `json:"deleting,omitempty"`
	Inventory          []InventoryEntry    `json:"inventory,omitempty"`
	Deployments        []status.Deployment `json:"deployments,omitempty"`
	LastRollout        string              `json:"lastRollout,omitempty"`
	Error              string              `json:"error,omitempty"`
	// GitFailed is set while Error is the remote's (ls-remote) failure.
	GitFailed bool `json:"gitFailed,omitempty"`
	// Dirty: a rollout is due (new commit, spec, clusters, sync).
	Dirty bool `json:"dirty,omitempty"`
	// ResolveDue: the remote should be checked now.
	ResolveDue bool `json:"resolveDue,omitempty"`
	// Polls counts polls, for deterministic jitter.
	Polls int64 `json:"polls,omitempty"`
	// FailedCommit and FailedGeneration name a commit and spec that could
	// not be rendered; polling does not retry them (sync does).
	FailedCommit     string `json:"failedCommit,omitempty"`
	FailedGeneration int64  `json:"failedGeneration,omitempty"`
	// Watched is the hash of the watch set last sent to each cluster.
	Watched map[string]string `json:"watched,omitempty"`
	// Syncs counts sync signals, so a client can wait for its own sync.
	Syncs int64 `json:"syncs,omitempty"`
	// Repair: a sync asked for a rollout that restores drifted releases.
	Repair bool `json:"repair,omitempty"`
	// Halts and Waits are the last rollout's halted bundles and what
	// still held deployments back when it ended.
	Halts []status.Halt `json:"halts,omitempty"`
	Waits []status.Wait `json:"waits,omitempty"`
	// Warnings are what reading the last rolled-out commit ignored.
	Warnings []string `json:"warnings,omitempty"`
	// PollFailures counts failed checks of the remote in a row.
	PollFailures int `json:"pollFailures,omitempty"`
	// LatestCommitSeen is when a check of the remote first saw
	// LatestCommit (workflow time).
	LatestCommitSeen time.Time `json:"latestCommitSeen,omitzero"`
	// Webhooks counts authenticated push signals since the repo or branch
	// last changed; WebhookCommit and LastWebhookTime are the last push's.
	Webhooks        int64     `json:"webhooks,omitempty"`
	WebhookCommit   string    `json:"webhookCommit,omitempty"`
	LastWebhookTime time.Time `json:"lastWebhookTime,omitzero"`
	// RetryDue: the backoff of a failed deployment is over, or the last
	// rollout stopped where clusters had to become Ready and a watch
	// reported one did; the next rollout goes on (it never supersedes
	// one).
	RetryDue bool `json:"retryDue,omitempty"`
	// Running is the rollout in flight when the run continued as new; the
	// new run adopts it.
	Running *RunningRollout `json:"running,omitempty"`
	// Inflight is the running rollout's planned inventory: every release
	// it may deploy or remove. Should the rollout end without a result,
	// it joins the inventory, so no release is forgotten.
	Inflight []InventoryEntry `json:"inflight,omitempty"`
	// Approvals are the partitions approved in the rollouts of
	// ApprovalsCommit; a later rollout of that commit keeps those that
	// deploy the same (rollout.Approval).
	Approvals       []rollout.Approval `json:"approvals,omitempty"`
	ApprovalsCommit string             `json:"approvalsCommit,omitempty"`
	// LiveSeq counts the live reports taken (status.LiveReport.Seq).
	LiveSeq int64 `json:"liveSeq,omitempty"`
	// OutOfContact are the clusters whose workflow said they lost
	// contact, sorted by cluster: their deployments are shown as not known
	// to be Ready (status.WithContacts) until contact returns.
	OutOfContact []status.ClusterContact `json:"outOfContact,omitempty"`
	// Guarded are the uninstalls the deletion guard held in the last
	// rollout; DeletionsApproved those `flotilla approve --deletions`
	// let go, the DeletionApprovals-th approval, until a rollout started
	// after it ends.
	Guarded           []rollout.ReleaseRef `json:"guarded,omitempty"`
	DeletionsApproved []rollout.ReleaseRef `json:"deletionsApproved,omitempty"`
	DeletionApprovals int                  `json:"deletionApprovals,omitempty"`
	// DeletionsApprovedBy and DeletionsApprovedAt are who sent the last
	// approval of DeletionsApproved and when (workflow time).
	DeletionsApprovedBy protocol.Identity `json:"deletionsApprovedBy,omitzero"`
	DeletionsApprovedAt time.Time         `json:"deletionsApprovedAt,omitzero"`
	// ManagedBy is who applied the spec when not the CLI
	// (protocol.ManagedByKubernetes): applies from anyone else are refused.
	ManagedBy string `json:"managedBy,omitempty"`
	// Policy is what the GitRepo knows of its namespace's
	// GitRepoRestrictions and Policies (versionPolicy).
	Policy PolicyState `json:"policy,omitzero"`
	// RenderedCommit is set while Commit changed nothing the GitRepo
	// reads since the commit its deployments were rendered from: that
	// one (ResolveResult.Unchanged). Empty: Commit itself.
	RenderedCommit string `json:"renderedCommit,omitempty"`
	// Follow is the newest commit that changes nothing the GitRepo reads
	// since the commit its running rollout rolls out: the GitRepo's
	// Commit, with that one as RenderedCommit, once the rollout ends as
	// it should (versionFollowUnchanged).
	Follow *FollowCommit `json:"follow,omitempty"`
	// Rejected is the newest commit spec.verify refused; LatestCommit
	// stays the last one it accepted.
	Rejected *activities.Rejection `json:"rejected,omitempty"`
	// Verified names the key that signed LatestCommit (spec.verify).
	Verified string `json:"verified,omitempty"`
	// GitWarnings are the last check of the remote's warnings.
	GitWarnings []string `json:"gitWarnings,omitempty"`
	// NextCheck is when the remote is asked again when its host asked to
	// wait (RateLimit.RetryAt); NextCheckReason says why.
	NextCheck       time.Time `json:"nextCheck,omitzero"`
	NextCheckReason string    `json:"nextCheckReason,omitempty"`
	// History is the GitRepo's audit trail, oldest first, bounded by
	// history.Append; HistorySeq numbers its entries (versionHistory).
	History    []history.Entry `json:"history,omitempty"`
	HistorySeq int64           `json:"historySeq,omitempty"`
	// Trigger is why a rollout is due (the next rollout's reason);
	// CheckTrigger why the remote is to be checked (a new commit found is
	// due for that reason).
	Trigger      *history.Trigger `json:"trigger,omitempty"`
	CheckTrigger *history.Trigger `json:"checkTrigger,omitempty"`
	// Pin is the commit `flotilla rollback --to` pinned, until `flotilla
	// resume`.
	Pin *Pin `json:"pin,omitempty"`
}

// FollowCommit is a commit taken without a render while a rollout runs:
// Commit changes nothing the GitRepo reads since Since, the running
// rollout's commit, at Generation.
type FollowCommit struct {
	Commit     string `json:"commit"`
	Since      string `json:"since"`
	Generation int64  `json:"generation"`
}

// RunningRollout is a rollout carried across continue-as-new.
type RunningRollout struct {
	ID          string `json:"id"`
	Commit      string `json:"commit"`
	Generation  int64  `json:"generation"`
	Superseding bool   `json:"superseding,omitempty"`
	// LiveSeq is the GitRepo's LiveSeq when the rollout started; Repair:
	// a sync started it (RolloutInput.Repair).
	LiveSeq int64 `json:"liveSeq,omitempty"`
	Repair  bool  `json:"repair,omitempty"`
	// DeletionApprovals is the GitRepo's DeletionApprovals when the
	// rollout started.
	DeletionApprovals int `json:"deletionApprovals,omitempty"`
	// Kind, Trigger and Start are what its history entry records.
	Kind    history.Kind    `json:"kind,omitempty"`
	Trigger history.Trigger `json:"trigger,omitzero"`
	Start   time.Time       `json:"start,omitzero"`
}

// Polling intervals: a GitRepo that receives webhooks polls hourly (as a
// safety net: a host does not redeliver a failed delivery) unless its
// spec sets an interval; a failing remote is polled less and less often,
// down to once per maxPollBackoff.
const (
	webhookPollingInterval = time.Hour
	maxPollBackoff         = 5 * time.Minute
)

// GitRepoWorkflow is the entity workflow of one GitRepo (ID
// gitrepo/<namespace>/<name>). It takes its spec from the apply update,
// polls the remote, and runs one RolloutWorkflow per change; a newer change
// supersedes a running rollout, which stops starting work, lets in-flight
// steps finish and hands back its inventory.
func GitRepoWorkflow(ctx workflow.Context, in GitRepoInput) error {
	return runEntity(ctx, activities.GitRepoRef{Namespace: in.Namespace, Name: in.Name}, in)
}

// HelmOpWorkflow is the entity workflow of one HelmOp (ID
// helmop/<namespace>/<name>): a GitRepo workflow whose "commit" is the
// chart version, resolved centrally (and polled only for a constraint),
// and whose one bundle is the HelmOp's chart. Strategies, dependsOn,
// drift, status and the CLI are the GitRepo's.
func HelmOpWorkflow(ctx workflow.Context, in GitRepoInput) error {
	return runEntity(ctx, activities.GitRepoRef{Namespace: in.Namespace, Name: in.Name, Kind: api.KindHelmOp}, in)
}

func runEntity(ctx workflow.Context, ref activities.GitRepoRef, in GitRepoInput) error {
	g := &gitRepo{ref: ref, id: workflow.GetInfo(ctx).WorkflowExecution.ID, budget: historyLimit}
	if in.HistoryBudget > 0 {
		g.budget = in.HistoryBudget
	}
	if in.State != nil {
		g.s = *in.State
	}
	g.longLived = workflow.GetVersion(ctx, versionLongLived, workflow.DefaultVersion, 1) == 1
	g.policy = workflow.GetVersion(ctx, versionPolicy, workflow.DefaultVersion, 1) == 1
	g.follow = workflow.GetVersion(ctx, versionFollowUnchanged, workflow.DefaultVersion, 1) == 1
	g.finishReported = workflow.GetVersion(ctx, versionFinishReported, workflow.DefaultVersion, 1) == 1
	if err := g.register(ctx); err != nil {
		return err
	}
	g.adopt(ctx)
	workflow.Go(ctx, g.poll)
	if workflow.GetVersion(ctx, versionFailureRetry, workflow.DefaultVersion, 1) == 1 {
		workflow.Go(ctx, g.retryFailures)
	}
	return g.loop(ctx, in)
}

type gitRepo struct {
	ref activities.GitRepoRef
	id  string
	s   GitRepoState
	// running is the rollout in flight; superseding is set once it was
	// asked to stop.
	running     string
	superseding bool
	// cur is what the running rollout rolls out (its ID and superseding
	// are running and superseding), as continue-as-new carries it.
	cur  RunningRollout
	done workflow.Future
	// pollNow wakes the poller (spec change, sync).
	pollReset int
	attrs     searchAttrs
	// details is the line last shown in the Temporal UI.
	details string
	// signals are the channels the workflow serves, drained before it
	// continues as new so no signal is lost with the old run.
	signals []signal
	// started is set once the running rollout's child has started, so a
	// supersede signal can reach it.
	started bool
	// resolved counts finished checks of the remote.
	resolved int
	// repoKey is the FlotillaRepoURL value last written by this run.
	repoKey string
	// backoff: this run's poller backs off on failures (versionPollBackoff).
	backoff bool
	// finished counts finished rollouts, so the retry timer is set anew.
	finished int
	// clusterChanges counts the cluster changes gathered while a rollout
	// runs; gathering is the gathering in progress (0: none), its ID
	// taken from gatherings.
	clusterChanges        int
	gathering, gatherings int
	// longLived: this run follows versionLongLived (polls never start
	// rollouts, retries never supersede, the run continues as new while a
	// rollout runs).
	longLived bool
	// budget is the history length at which the run continues as new.
	budget int
	// policy: this run checks its spec against the namespace's policies
	// (versionPolicy).
	policy bool
	// follow: a commit that changes nothing since the running rollout's
	// commit does not supersede it (versionFollowUnchanged).
	follow bool
	// finishReported: a rollout that reported its result is finished by
	// this run before it continues as new (versionFinishReported).
	finishReported bool
	// polled: the poll timer (or a Check signal) asked for the next check
	// of the remote, which may then reuse a shared answer up to a polling
	// interval old; fresh: something else asked (a webhook, a sync, an
	// apply), which must see the remote as it is now.
	polled, fresh bool
	// settle settles done with the running rollout's end.
	settle func(err error)
	// owned: the running rollout is a child this run started (not one it
	// adopted); closed: that child has closed; reported: its result, come
	// by signal before it closed.
	owned, closed bool
	reported      *RolloutResult
	// events emits the GitRepo's notify.Events; drift gathers what the
	// live signal being taken changed about drift.
	events notifier
	drift  *driftBatch
}

type signal struct {
	ch workflow.ReceiveChannel
	// value returns a pointer the payload decodes into; nil: no payload.
	value func() any
	apply func(ctx workflow.Context, v any)
}

// receive takes one signal off the channel (async: only if one is
// buffered) and applies it.
func (s signal) receive(ctx workflow.Context, async bool) bool {
	var v any
	if s.value != nil {
		v = s.value()
	}
	if async {
		if !s.ch.ReceiveAsync(v) {
			return false
		}
	} else {
		s.ch.Receive(ctx, v)
	}
	s.apply(ctx, v)
	return true
}

// drain applies every signal still buffered and reports whether there
// was one.
func (g *gitRepo) drain(ctx workflow.Context) bool {
	got := false
	for _, sig := range g.signals {
		for sig.receive(ctx, true) {
			got = true
		}
	}
	return got
}

func (g *gitRepo) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, g.status); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryWebhookTarget, g.webhookTarget); err != nil {
		return err
	}
	// A query handler adds nothing to the history: runs of any version
	// answer it once a worker with this code replays them.
	if err := workflow.SetQueryHandler(ctx, protocol.QuerySource, g.source); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryHistory, g.historyQuery); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateRollback, g.rollback,
		workflow.UpdateHandlerOptions{Validator: g.validateRollback}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryPlanBase, g.planBase); err != nil {
		return err
	}
	if g.helmOp() {
		err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply, g.applyHelmOp,
			workflow.UpdateHandlerOptions{Validator: g.validateHelmOp})
		if err != nil {
			return err
		}
	} else if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply, g.apply,
		workflow.UpdateHandlerOptions{Validator: g.validate}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApproveDeletions, g.approveDeletions,
		workflow.UpdateHandlerOptions{Validator: g.validateApproveDeletions}); err != nil {
		return err
	}
	g.registerSignals(ctx)
	return nil
}

// registerSignals starts one receiver per signal, in this order.
func (g *gitRepo) registerSignals(ctx workflow.Context) {
	plain := func(f func()) func(workflow.Context, any) { return func(workflow.Context, any) { f() } }
	for _, sig := range []struct {
		name string
		signal
	}{
		{protocol.SignalSync, signal{
			value: func() any { return new(protocol.Sync) }, // null from CLIs before identities
			apply: func(_ workflow.Context, v any) { g.sync(*v.(*protocol.Sync)) },
		}},
		{protocol.SignalPause, signal{apply: plain(func() { g.s.Paused = true })}},
		{protocol.SignalResume, signal{apply: plain(g.resume)}},
		{protocol.SignalDelete, signal{apply: plain(func() { g.s.Deleting = true })}},
		{protocol.SignalClustersChanged, signal{apply: func(ctx workflow.Context, _ any) { g.clustersChanged(ctx) }}},
		{protocol.SignalPolicyChanged, signal{apply: plain(g.policyChanged)}},
		{protocol.SignalPush, signal{
			value: func() any { return new(protocol.Push) },
			apply: func(ctx workflow.Context, v any) { g.push(ctx, *v.(*protocol.Push)) },
		}},
		{protocol.SignalCheck, signal{
			value: func() any { return new(protocol.Check) },
			apply: func(_ workflow.Context, v any) { g.check(*v.(*protocol.Check)) },
		}},
		{protocol.SignalLive, signal{
			value: func() any { return new(status.LiveSignal) },
			apply: func(ctx workflow.Context, v any) { g.live(ctx, *v.(*status.LiveSignal)) },
		}},
		{signalRolloutReport, signal{
			value: func() any { return new(RolloutReport) },
			apply: func(ctx workflow.Context, v any) { g.rolloutReported(ctx, *v.(*RolloutReport)) },
		}},
	} {
		sig.ch = workflow.GetSignalChannel(ctx, sig.name)
		g.signals = append(g.signals, sig.signal)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				sig.receive(ctx, false)
			}
		})
	}
}

// clustersChanged takes a ClustersChanged signal: with no rollout
// running a rollout is due at once; while one runs, the changes are
// gathered and supersede it once they pause (see clusterQuiet), or with
// its end, whichever comes first. A rollout superseded already is told
// again at once (versionResupersede).
func (g *gitRepo) clustersChanged(ctx workflow.Context) {
	if g.superseding && g.running != "" && workflow.GetVersion(ctx, versionResupersede, workflow.DefaultVersion, 1) == 1 {
		// Superseded already: it may still wait for a cluster that was
		// just removed; it looks again (a rollout takes any number of
		// supersede signals).
		id := g.running
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.SignalExternalWorkflow(ctx, id, "", protocol.SignalSupersede, nil).Get(ctx, nil)
		})
	}
	g.due(history.Trigger{Kind: history.TriggerClusters})
	if g.running == "" || workflow.GetVersion(ctx, versionCoalesceClusters, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		g.s.Dirty = true
		return
	}
	g.clusterChanges++
	if g.gathering != 0 {
		return
	}
	g.gatherings++
	id, first := g.gatherings, workflow.Now(ctx)
	g.gathering = id
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			seen := g.clusterChanges
			_ = workflow.NewTimerWithOptions(ctx, clusterQuiet, workflow.TimerOptions{Summary: "gather cluster changes"}).Get(ctx, nil)
			if g.gathering != id {
				return // the rollout ended and took the changes
			}
			if g.clusterChanges == seen || workflow.Now(ctx).Sub(first) >= clusterMaxWait {
				break
			}
		}
		g.gathering = 0
		g.s.Dirty = true
	})
}

// sync takes a sync signal: check the remote now and roll out, repairing
// drift, even if nothing changed; s says who asked.
func (g *gitRepo) sync(s protocol.Sync) {
	g.s.ResolveDue, g.s.Dirty, g.s.Repair, g.fresh = true, true, true, true
	g.s.Syncs++
	g.pollReset++
	t := history.Trigger{Kind: history.TriggerSync, Identity: s.Identity}
	g.due(t)
	g.checkDue(t)
}

// resume lifts a pause and a rollback's pin. A GitRepo at the webhook pace may have unsettled
// deployments to refresh now, so its poll timer restarts; without
// webhooks (every run recorded before pushes existed) the timer is left
// alone, which keeps those histories replaying.
func (g *gitRepo) resume() {
	g.s.Paused, g.s.ResolveDue, g.fresh = false, true, true
	g.checkDue(history.Trigger{Kind: history.TriggerResume})
	g.unpin()
	if g.s.Webhooks > 0 {
		g.pollReset++
	}
}

// push records a webhook's push and checks the remote unless the commit
// is already known (applied, rolling out, or failed). The remote, not the
// payload, decides what rolls out: a stale or reordered delivery cannot
// move the GitRepo back.
func (g *gitRepo) push(ctx workflow.Context, p protocol.Push) {
	if g.s.GitRepo == nil || g.s.Deleting || g.s.GitRepo.Spec.Revision != "" {
		return
	}
	if p.Authenticated {
		// Only a delivery a secret vouched for shows the host sends
		// webhooks; anyone could post an unsigned one.
		if g.s.Webhooks == 0 && g.s.GitRepo.Spec.PollingInterval == nil {
			g.pollReset++ // polling relaxes to webhookPollingInterval now
		}
		g.s.Webhooks++
	}
	g.s.WebhookCommit, g.s.LastWebhookTime = p.Commit, workflow.Now(ctx).UTC()
	if p.Commit != "" && p.Commit == g.s.LatestCommit {
		return
	}
	g.s.ResolveDue, g.fresh = true, true
	g.checkDue(history.Trigger{Kind: history.TriggerWebhook, Delivery: p.Delivery})
}

// check takes a Check signal: another GitRepo's check of the same remote
// saw a new commit, so this one checks now too; the controller's shared
// answer is fresh, so it may be reused (no request to the host).
func (g *gitRepo) check(c protocol.Check) {
	if g.s.GitRepo == nil || g.s.Deleting || g.s.GitRepo.Spec.Revision != "" || c.Commit == g.s.LatestCommit ||
		(g.s.Rejected != nil && c.Commit == g.s.Rejected.Commit) {
		return
	}
	g.s.ResolveDue, g.polled = true, true
}

func (g *gitRepo) webhookTarget() (protocol.WebhookTarget, error) {
	if g.s.GitRepo == nil || g.s.Deleting {
		return protocol.WebhookTarget{}, fmt.Errorf("%s is not applied", g.ref.Title())
	}
	spec := g.s.GitRepo.Spec
	return protocol.WebhookTarget{Branch: spec.Branch, Revision: spec.Revision, WebhookSecret: spec.WebhookSecret}, nil
}

// source answers QuerySource: the spec and the commits the GitRepo's
// releases come from, for controllers that render a commit again.
func (g *gitRepo) source() (protocol.GitRepoSource, error) {
	if g.s.GitRepo == nil {
		return protocol.GitRepoSource{}, fmt.Errorf("%s is not applied", g.ref.Title())
	}
	src := protocol.GitRepoSource{Spec: g.spec(), Generation: g.s.Generation, Commit: g.s.Commit,
		LatestCommit: g.s.LatestCommit}
	if g.running != "" {
		src.RolloutCommit = g.cur.Commit
	}
	return src, nil
}

func (g *gitRepo) validate(ctx workflow.Context, in protocol.GitRepoApply) error {
	repo := in.GitRepo
	repo.Default()
	//workflowcheck:ignore deterministic: result does not depend on map order
	return g.checkApply(api.KindGitRepo, repo.Metadata, in.ManagedBy, repo.Validate)
}

// helmOp reports whether the workflow is a HelmOp's.
func (g *gitRepo) helmOp() bool { return g.ref.Kind == api.KindHelmOp }

func (g *gitRepo) validateHelmOp(ctx workflow.Context, in protocol.HelmOpApply) error {
	h := in.HelmOp
	h.Default()
	//workflowcheck:ignore deterministic: result does not depend on map order
	return g.checkApply(api.KindHelmOp, h.Metadata, in.ManagedBy, h.Validate)
}

// checkApply rejects an apply of a resource named by meta that was sent
// to another entity's workflow, that arrives while this one is being
// deleted, or that comes from another door than the one managing it (a
// CLI apply of a GitRepo the management cluster holds); otherwise it is
// the resource's own validation. A rejection adds nothing to the history.
func (g *gitRepo) checkApply(kind string, meta api.ObjectMeta, managedBy string, validate func() error) error {
	if meta.Namespace != g.ref.Namespace || meta.Name != g.ref.Name {
		return temporal.NewNonRetryableApplicationError(kind+" "+meta.Namespace+"/"+meta.Name+
			" sent to the workflow of "+g.ref.String(), "InvalidSpec", nil)
	}
	if g.s.Deleting {
		return temporal.NewNonRetryableApplicationError(g.ref.Title()+" is being deleted", "Deleting", nil)
	}
	if g.s.ManagedBy != "" && managedBy != g.s.ManagedBy {
		return temporal.NewNonRetryableApplicationError(protocol.ManagedMessage(g.ref.Title(), g.s.ManagedBy), ErrTypeManaged, nil)
	}
	return validate()
}

// applyHelmOp keeps the HelmOp and applies the GitRepo it rolls out as.
func (g *gitRepo) applyHelmOp(ctx workflow.Context, in protocol.HelmOpApply) (protocol.ApplyResult, error) {
	h := in.HelmOp
	h.Default()
	g.s.HelmOp = &h
	//workflowcheck:ignore deterministic: decodes the spec's JSON; no map order, time or I/O
	return g.apply(ctx, protocol.GitRepoApply{GitRepo: h.AsGitRepo(), ManagedBy: in.ManagedBy})
}

func (g *gitRepo) apply(ctx workflow.Context, in protocol.GitRepoApply) (protocol.ApplyResult, error) {
	repo := in.GitRepo
	repo.Default()
	res := protocol.ApplyResult{Created: g.s.GitRepo == nil}
	//workflowcheck:ignore deterministic: result does not depend on map order
	if g.s.GitRepo == nil || !reflect.DeepEqual(g.s.GitRepo.Spec, repo.Spec) {
		res.Changed = true
		g.s.Generation++
		if g.s.GitRepo == nil || g.s.GitRepo.Spec.Paused != repo.Spec.Paused {
			g.s.Paused = repo.Spec.Paused
		}
		if g.s.GitRepo != nil && (g.s.GitRepo.Spec.Repo != repo.Spec.Repo || g.s.GitRepo.Spec.Branch != repo.Spec.Branch) {
			g.s.Webhooks = 0 // the new source has sent none yet: poll at the normal pace
		}
		g.s.Dirty, g.s.ResolveDue, g.fresh = true, true, true
		g.pollReset++
		g.due(history.Trigger{Kind: history.TriggerSpec})
	}
	g.s.GitRepo = &repo
	g.s.ManagedBy = in.ManagedBy
	res.Generation = g.s.Generation
	return res, nil
}

// ErrTypeManaged is the error type of an apply refused because another
// door manages the resource (GitRepoState.ManagedBy).
const ErrTypeManaged = "Managed"
