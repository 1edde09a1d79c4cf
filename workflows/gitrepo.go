package workflows

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
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
	// Webhooks counts authenticated push signals since the repo or branch
	// last changed; WebhookCommit and LastWebhookTime are the last push's.
	Webhooks        int64     `json:"webhooks,omitempty"`
	WebhookCommit   string    `json:"webhookCommit,omitempty"`
	LastWebhookTime time.Time `json:"lastWebhookTime,omitzero"`
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
	g := &gitRepo{ref: ref, id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if in.State != nil {
		g.s = *in.State
	}
	if err := g.register(ctx); err != nil {
		return err
	}
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
	// runningCommit and runningGeneration are what the running rollout
	// rolls out.
	runningCommit     string
	runningGeneration int64
	done              workflow.Future
	// pollNow wakes the poller (spec change, sync).
	pollReset int
	attrs     searchAttrs
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
}

type signal struct {
	ch workflow.ReceiveChannel
	// value returns a pointer the payload decodes into; nil: no payload.
	value func() any
	apply func(v any)
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
	s.apply(v)
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
	plain := func(f func()) func(any) { return func(any) { f() } }
	for _, sig := range []struct {
		name string
		signal
	}{
		{protocol.SignalSync, signal{apply: plain(func() { g.s.ResolveDue, g.s.Dirty, g.s.Repair = true, true, true; g.s.Syncs++; g.pollReset++ })}},
		{protocol.SignalPause, signal{apply: plain(func() { g.s.Paused = true })}},
		{protocol.SignalResume, signal{apply: plain(g.resume)}},
		{protocol.SignalDelete, signal{apply: plain(func() { g.s.Deleting = true })}},
		{protocol.SignalClustersChanged, signal{apply: plain(func() { g.clustersChanged(ctx) })}},
		{protocol.SignalPush, signal{
			value: func() any { return new(protocol.Push) },
			apply: func(v any) { g.push(ctx, *v.(*protocol.Push)) },
		}},
		{protocol.SignalLive, signal{
			value: func() any { return new(status.LiveSignal) },
			apply: func(v any) { g.live(ctx, *v.(*status.LiveSignal)) },
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
	return nil
}

// clustersChanged takes a ClustersChanged signal: with no rollout
// running a rollout is due at once; while one runs, the changes are
// gathered and supersede it once they pause (see clusterQuiet), or with
// its end, whichever comes first.
func (g *gitRepo) clustersChanged(ctx workflow.Context) {
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

// resume lifts a pause. A GitRepo at the webhook pace may have unsettled
// deployments to refresh now, so its poll timer restarts; without
// webhooks (every run recorded before pushes existed) the timer is left
// alone, which keeps those histories replaying.
func (g *gitRepo) resume() {
	g.s.Paused, g.s.ResolveDue = false, true
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
	g.s.ResolveDue = true
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
	src := protocol.GitRepoSource{Spec: g.s.GitRepo.Spec, Generation: g.s.Generation, Commit: g.s.Commit,
		LatestCommit: g.s.LatestCommit}
	if g.running != "" {
		src.RolloutCommit = g.runningCommit
	}
	return src, nil
}

// pollingInterval is the interval between checks of the remote now; 0
// when polling is disabled.
func (g *gitRepo) pollingInterval() time.Duration {
	if g.s.GitRepo == nil || g.s.GitRepo.Spec.DisablePolling {
		return 0
	}
	spec := g.s.GitRepo.Spec
	d := spec.Polling()
	// Webhooks make polling a safety net, but deployments that have not
	// settled are still refreshed at the normal pace.
	if spec.PollingInterval == nil && g.s.Webhooks > 0 && !g.refreshDue() {
		d = webhookPollingInterval
	}
	if g.s.PollFailures > 0 && d < maxPollBackoff {
		d = min(d<<min(g.s.PollFailures, 10), maxPollBackoff)
	}
	return d
}

func (g *gitRepo) validate(ctx workflow.Context, in protocol.GitRepoApply) error {
	repo := in.GitRepo
	repo.Default()
	//workflowcheck:ignore deterministic: result does not depend on map order
	return g.checkApply(api.KindGitRepo, repo.Metadata, repo.Validate)
}

// helmOp reports whether the workflow is a HelmOp's.
func (g *gitRepo) helmOp() bool { return g.ref.Kind == api.KindHelmOp }

func (g *gitRepo) validateHelmOp(ctx workflow.Context, in protocol.HelmOpApply) error {
	h := in.HelmOp
	h.Default()
	//workflowcheck:ignore deterministic: result does not depend on map order
	return g.checkApply(api.KindHelmOp, h.Metadata, h.Validate)
}

// checkApply rejects an apply of a resource named by meta that was sent
// to another entity's workflow, or that arrives while this one is being
// deleted; otherwise it is the resource's own validation.
func (g *gitRepo) checkApply(kind string, meta api.ObjectMeta, validate func() error) error {
	if meta.Namespace != g.ref.Namespace || meta.Name != g.ref.Name {
		return temporal.NewNonRetryableApplicationError(kind+" "+meta.Namespace+"/"+meta.Name+
			" sent to the workflow of "+g.ref.String(), "InvalidSpec", nil)
	}
	if g.s.Deleting {
		return temporal.NewNonRetryableApplicationError(g.ref.Title()+" is being deleted", "Deleting", nil)
	}
	return validate()
}

// applyHelmOp keeps the HelmOp and applies the GitRepo it rolls out as.
func (g *gitRepo) applyHelmOp(ctx workflow.Context, in protocol.HelmOpApply) (protocol.ApplyResult, error) {
	h := in.HelmOp
	h.Default()
	g.s.HelmOp = &h
	//workflowcheck:ignore deterministic: decodes the spec's JSON; no map order, time or I/O
	return g.apply(ctx, protocol.GitRepoApply{GitRepo: h.AsGitRepo()})
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
		g.s.Dirty, g.s.ResolveDue = true, true
		g.pollReset++
	}
	g.s.GitRepo = &repo
	res.Generation = g.s.Generation
	return res, nil
}

// poll checks the remote every polling interval ±10 %.
func (g *gitRepo) poll(ctx workflow.Context) {
	// Runs started before this version start the next timer as soon as a
	// poll fires; later ones wait for the check, whose outcome sets the
	// interval (backoff).
	waitForCheck := workflow.GetVersion(ctx, versionPollBackoff, workflow.DefaultVersion, 1) == 1
	g.backoff = waitForCheck
	for {
		reset := g.pollReset
		if g.s.GitRepo == nil || g.s.GitRepo.Spec.DisablePolling {
			_ = workflow.Await(ctx, func() bool { return g.pollReset != reset || (g.s.GitRepo != nil && !g.s.GitRepo.Spec.DisablePolling) })
			continue
		}
		timerCtx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, g.jitter(g.pollingInterval()))
		fired := false
		_ = workflow.Await(ctx, func() bool { fired = timer.IsReady(); return fired || g.pollReset != reset })
		cancel()
		if fired {
			g.s.Polls++
			g.s.ResolveDue = true
			if g.refreshDue() {
				g.s.Dirty = true
			}
			if waitForCheck {
				resolved := g.resolved
				_ = workflow.Await(ctx, func() bool { return g.resolved != resolved || g.s.Deleting || g.pollReset != reset })
			}
		}
	}
}

// refreshDue: deployments that have not settled are refreshed on each
// poll (not while paused, nor after a halt: the operator decides what
// comes next).
func (g *gitRepo) refreshDue() bool {
	return !g.s.Paused && len(g.s.Halts) == 0 && unsettled(g.s.Deployments)
}

// jitter spreads polls ±10 % deterministically (a hash of the workflow ID
// and the poll count), so replays agree without recording randomness.
func (g *gitRepo) jitter(d time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(g.id))
	_, _ = h.Write([]byte{byte(g.s.Polls), byte(g.s.Polls >> 8), byte(g.s.Polls >> 16)})
	frac := float64(h.Sum64()%2001)/10000 - 0.1 // [-0.1, 0.1]
	return d + time.Duration(float64(d)*frac)
}

func (g *gitRepo) loop(ctx workflow.Context, in GitRepoInput) error {
	for {
		if err := workflow.Await(ctx, func() bool { return g.due(ctx) }); err != nil {
			return err
		}
		done, err := g.step(ctx, in)
		if done || err != nil {
			return err
		}
	}
}

// due reports whether the loop has something to do.
func (g *gitRepo) due(ctx workflow.Context) bool {
	if g.s.GitRepo == nil {
		return g.s.Deleting
	}
	idle := g.running == ""
	return g.s.ResolveDue ||
		(idle && g.s.Deleting) ||
		(idle && g.rolloutDue()) ||
		(!idle && g.started && !g.superseding && (g.s.Deleting || (g.s.Dirty && !g.s.Paused))) ||
		(idle && g.continueAsNew(ctx))
}

// rolloutDue: a change waits to be rolled out and may be.
func (g *gitRepo) rolloutDue() bool { return g.s.Dirty && !g.s.Paused && g.s.LatestCommit != "" }

// step does the one thing due, most urgent first; done reports that the
// workflow ends (deleted, or continued as new with err).
func (g *gitRepo) step(ctx workflow.Context, in GitRepoInput) (done bool, err error) {
	logger := workflow.GetLogger(ctx)
	switch {
	case g.s.GitRepo == nil && g.s.Deleting:
		return true, nil
	case g.s.ResolveDue && !g.s.Deleting:
		g.resolve(ctx)
	case g.running != "" && g.started && !g.superseding:
		g.superseding = true
		logger.Info("Superseding rollout", "rollout", g.running)
		_ = workflow.SignalExternalWorkflow(ctx, g.running, "", protocol.SignalSupersede, nil).Get(ctx, nil)
	case g.running == "" && g.s.Deleting:
		g.s.ResolveDue = false
		g.startRollout(ctx, true)
		if err := g.done.Get(ctx, nil); err != nil {
			return true, err
		}
		logger.Info("GitRepo deleted", "gitrepo", g.ref.String())
		return true, nil
	case g.running == "" && g.rolloutDue():
		g.startRollout(ctx, false)
	case g.running == "" && g.continueAsNew(ctx):
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return true, err
		}
		if g.drain(ctx) {
			return false, nil // act on them first; continue as new when idle again
		}
		in.State = &g.s
		if g.helmOp() {
			return true, workflow.NewContinueAsNewError(ctx, HelmOpWorkflow, in)
		}
		return true, workflow.NewContinueAsNewError(ctx, GitRepoWorkflow, in)
	default:
		g.s.ResolveDue = false
	}
	return false, nil
}

func (g *gitRepo) continueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > historyLimit
}

// resolve asks the remote which commit the branch or revision is at.
func (g *gitRepo) resolve(ctx workflow.Context) {
	g.s.ResolveDue = false
	var a *activities.Activities
	var res activities.ResolveResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, gitOptions), a.ResolveCommit,
		activities.ResolveInput{GitRepo: g.ref, Spec: g.s.GitRepo.Spec}).Get(ctx, &res)
	g.resolved++
	g.upsertRepoKey(ctx)
	if err != nil {
		prefix := "git: "
		if g.helmOp() {
			prefix = "chart: "
		}
		g.s.Error, g.s.GitFailed = prefix+activityMessage(err), true
		g.s.PollFailures++
		g.upsert(ctx)
		return
	}
	if g.s.PollFailures > 0 && g.backoff {
		g.pollReset++ // a backed-off timer may still be running: back to the normal pace
	}
	g.s.PollFailures = 0
	current := g.s.Commit
	if g.running != "" {
		current = g.runningCommit
	}
	failed := res.Commit == g.s.FailedCommit && g.s.Generation == g.s.FailedGeneration
	if res.Commit != current && !failed {
		g.s.Dirty = true
	}
	g.s.LatestCommit = res.Commit
	if g.s.GitFailed {
		// The remote answers again: roll out what the failure held back.
		g.s.Error, g.s.GitFailed, g.s.Dirty = "", false, true
	}
}

// upsertRepoKey keeps FlotillaRepoURL, by which the webhook receiver finds
// the GitRepo, at the normalised key of the spec's repo: once per run and
// after the repo changed. Runs recorded before this (DefaultVersion) keep
// what upsert writes when their state or commit changes, and the receiver
// also looks GitRepos up by the URL as the payload spells it.
func (g *gitRepo) upsertRepoKey(ctx workflow.Context) {
	if g.helmOp() {
		return // no Git: no webhooks
	}
	key := webhook.SearchKey(g.s.GitRepo.Spec.Repo)
	if key == g.repoKey || workflow.GetVersion(ctx, versionRepoKeyAttr, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	g.repoKey = key
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.KeyRepoURL.ValueSet(key))
}

// startRollout starts a child RolloutWorkflow for the latest commit and
// spec; its result is folded in when it finishes.
func (g *gitRepo) startRollout(ctx workflow.Context, del bool) {
	commit := g.s.LatestCommit
	in := RolloutInput{GitRepo: g.ref, Spec: g.s.GitRepo.Spec, Commit: commit, Generation: g.s.Generation,
		Inventory: g.s.Inventory, Delete: del, Repair: g.s.Repair}
	g.s.Dirty, g.s.Repair = false, false
	id := protocol.RolloutID(g.ref.Namespace, g.ref.Name, commit, g.s.Generation)
	if g.helmOp() {
		id = "rollout/helmop/" + strings.TrimPrefix(id, "rollout/")
	}
	if del {
		id += "-delete"
	}
	summary := "roll out " + g.ref.String() + " at " + shortCommit(commit)
	if g.helmOp() {
		summary = "roll out " + g.ref.Title() + " at chart version " + commit
	}
	if del {
		summary = "remove everything " + g.ref.String() + " deployed"
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         summary,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalx.KeyGitRepo.ValueSet(g.ref.String()),
			temporalx.KeyCommit.ValueSet(commit),
			temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(g.s.GitRepo.Spec.Repo)),
			temporalx.KeyState.ValueSet("Rolling"),
		),
	})
	g.running, g.superseding, g.started = id, false, false
	g.runningCommit, g.runningGeneration = commit, g.s.Generation
	child := workflow.ExecuteChildWorkflow(cctx, RolloutWorkflow, in)
	future, settle := workflow.NewFuture(ctx)
	g.done = future
	workflow.Go(ctx, func(ctx workflow.Context) {
		_ = child.GetChildWorkflowExecution().Get(ctx, nil) // a failed start shows in child.Get
		g.started = true
		var res RolloutResult
		err := child.Get(ctx, &res)
		g.finish(ctx, id, res, err)
		settle.Set(nil, err)
	})
}

func (g *gitRepo) finish(ctx workflow.Context, id string, res RolloutResult, err error) {
	g.running, g.superseding, g.s.LastRollout = "", false, id
	g.finished++
	if g.gathering != 0 {
		// Cluster changes gathered during the rollout: the next one
		// takes them now.
		g.gathering = 0
		g.s.Dirty = true
	}
	switch {
	case err != nil:
		g.s.Error = "rollout " + id + ": " + activityMessage(err)
		g.s.Dirty = true
	case res.Error != "":
		g.s.Error = res.Error
		if res.Permanent {
			// Polling will not retry it; a new commit, spec or sync will.
			g.s.FailedCommit, g.s.FailedGeneration = res.Commit, res.Generation
		}
	default:
		g.s.Error = ""
		prev := g.s.Inventory
		g.s.Inventory, g.s.Deployments = res.Inventory, res.Deployments
		g.keepLive(prev)
		defer g.sendWatch(ctx)
		g.s.Halts, g.s.Waits, g.s.Warnings = res.Halts, res.Waits, res.Warnings
		if len(res.Halts) > 0 && !res.Superseded {
			// Polling does not redeploy what just failed and was rolled
			// back; a new commit, spec or sync does.
			g.s.FailedCommit, g.s.FailedGeneration = res.Commit, res.Generation
		}
		if !res.Superseded {
			g.s.Commit, g.s.ObservedGeneration = res.Commit, res.Generation
		} else {
			g.s.Dirty = true
		}
		if g.refreshDue() && g.s.Webhooks > 0 {
			g.pollReset++ // back from the webhook pace to refresh them
		}
	}
	g.upsert(ctx)
}

// searchAttrs are the search attribute values that change over a
// GitRepo's life; upsert writes them only when they differ.
type searchAttrs struct{ state, commit, clusters string }

// upsert keeps the workflow's search attributes current.
func (g *gitRepo) upsert(ctx workflow.Context) {
	sum := status.Summarize(g.s.Deployments) //workflowcheck:ignore order-independent counts
	state := string(sum.State)
	if g.s.Error != "" {
		state = "Error"
	}
	clusters := rollout.ClustersOf(g.s.Deployments)
	if !fitsClusterAttr(clusters) {
		// Too many for the 2 KiB attribute: the rollout's batches list
		// them.
		clusters = []string{}
	}
	want := searchAttrs{state: state, commit: g.s.Commit, clusters: strings.Join(clusters, ",")}
	if want == g.attrs {
		return
	}
	g.attrs = want
	// The Temporal UI shows this line on the GitRepo's page.
	details := fmt.Sprintf("%s at %s: %d/%d clusters ready", state, shortCommit(g.s.Commit), sum.ReadyClusters, sum.Clusters)
	if g.s.Error != "" {
		details += "; " + g.s.Error
	}
	workflow.SetCurrentDetails(ctx, details)
	repo := ""
	if g.s.GitRepo != nil {
		repo = g.s.GitRepo.Spec.Repo
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		temporalx.KeyGitRepo.ValueSet(g.ref.String()),
		temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(repo)),
		temporalx.KeyState.ValueSet(state),
		temporalx.KeyCommit.ValueSet(g.s.Commit),
		temporalx.KeyCluster.ValueSet(clusters),
	)
}

func (g *gitRepo) status() (status.GitRepo, error) {
	st := status.GitRepo{Kind: g.ref.Kind, Namespace: g.ref.Namespace, Name: g.ref.Name, Commit: g.s.Commit, LatestCommit: g.s.LatestCommit,
		Generation: g.s.Generation, ObservedGeneration: g.s.ObservedGeneration, Paused: g.s.Paused, Deleting: g.s.Deleting,
		Rollout: g.running, LastRollout: g.s.LastRollout, Error: g.s.Error, Syncs: g.s.Syncs,
		PollFailures: g.s.PollFailures, WebhookCommit: g.s.WebhookCommit}
	if !g.s.LastWebhookTime.IsZero() {
		t := g.s.LastWebhookTime
		st.LastWebhookTime = &t
	}
	if d := g.pollingInterval(); d > 0 {
		st.PollingInterval = d.String()
	}
	if g.s.GitRepo != nil {
		st.Repo, st.Branch, st.Revision = g.s.GitRepo.Spec.Repo, g.s.GitRepo.Spec.Branch, g.s.GitRepo.Spec.Revision
	}
	if g.helmOp() {
		st.Version = g.s.Commit
	}
	outOfSync := g.s.Paused && (g.s.LatestCommit != g.s.Commit || g.s.Generation != g.s.ObservedGeneration)
	for _, d := range g.s.Deployments {
		if outOfSync && d.State == status.Ready {
			d.State, d.Message = status.OutOfSync, "GitRepo is paused"
		}
		st.Deployments = append(st.Deployments, d)
	}
	st.Halts, st.Waits, st.Warnings = g.s.Halts, g.s.Waits, g.s.Warnings
	st.Watched = len(rollout.LiveReports(g.s.Inventory))
	st.Finish() //workflowcheck:ignore order-independent: Finish sorts what it builds
	// Settled: nothing runs and nothing is due, or nothing can run until
	// the remote answers (no commit known yet).
	st.Settled = g.running == "" && !g.s.ResolveDue && (!g.s.Dirty || g.s.Paused || g.s.LatestCommit == "")
	return st, nil
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	if c == "" {
		return "no commit"
	}
	return c
}

// retryFailures starts a rollout when the backoff of the earliest failed
// deployment is over: the rollout retries the deployments whose backoff
// is over and leaves the others alone. A halted rollout is not retried
// (a new commit, spec or sync is).
func (g *gitRepo) retryFailures(ctx workflow.Context) {
	for {
		seen := g.finished
		at := nextRetry(g.s.Inventory)
		if at.IsZero() || len(g.s.Halts) > 0 {
			_ = workflow.Await(ctx, func() bool { return g.finished != seen })
			continue
		}
		if wait := at.Sub(workflow.Now(ctx)); wait > 0 {
			timerCtx, cancel := workflow.WithCancel(ctx)
			timer := workflow.NewTimerWithOptions(timerCtx, wait, workflow.TimerOptions{Summary: "retry failed deployments"})
			_ = workflow.Await(ctx, func() bool { return timer.IsReady() || g.finished != seen })
			cancel()
			if !timer.IsReady() {
				continue // a rollout finished: the next retry may have moved
			}
		}
		g.s.Dirty = true
		_ = workflow.Await(ctx, func() bool { return g.finished != seen })
	}
}

// nextRetry is when the earliest failed deployment is due to be retried
// (zero when none failed).
func nextRetry(inv []InventoryEntry) time.Time {
	var at time.Time
	for _, e := range inv {
		if f := e.Failure; f != nil && (at.IsZero() || f.Next.Before(at)) {
			at = f.Next
		}
	}
	return at
}

// unsettled reports deployments worth refreshing on the next poll; those
// retried on a backoff of their own are not.
func unsettled(deps []status.Deployment) bool {
	for _, d := range deps {
		if d.NextRetry != "" {
			continue
		}
		switch d.State {
		case status.NotReady, status.WaitApplied, status.Pending:
			return true
		}
	}
	return false
}
