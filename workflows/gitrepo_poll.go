package workflows

import (
	"errors"
	"hash/fnv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

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

// pollWait is the wait before the next poll: the polling interval with
// jitter, or longer while the Git host asked to wait (NextCheck), so that
// no check asks it before the time it gave.
func (g *gitRepo) pollWait(ctx workflow.Context) time.Duration {
	d := g.jitter(g.pollingInterval())
	if !g.s.NextCheck.IsZero() {
		d = max(d, g.s.NextCheck.Sub(workflow.Now(ctx)))
	}
	return d
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
		timer := workflow.NewTimer(timerCtx, g.pollWait(ctx))
		fired := false
		_ = workflow.Await(ctx, func() bool { fired = timer.IsReady(); return fired || g.pollReset != reset })
		cancel()
		if fired {
			g.s.Polls++
			if !g.s.ResolveDue {
				g.checkDue(history.Trigger{Kind: history.TriggerPoll})
			}
			g.s.ResolveDue, g.polled = true, true
			if g.refreshDue() && !g.longLived {
				// Runs before versionLongLived rolled out again whatever
				// had not settled, superseding the rollout working on it.
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

// resolve asks the remote which commit the branch or revision is at and,
// for a new commit, whether it is signed as spec.verify asks and whether
// it changes anything the GitRepo reads.
func (g *gitRepo) resolve(ctx workflow.Context) {
	g.s.ResolveDue = false
	var a *activities.Activities
	var res activities.ResolveResult
	in := activities.ResolveInput{GitRepo: g.ref, Spec: g.spec(), Since: g.since()}
	if g.polled && !g.fresh && !g.helmOp() {
		in.MaxAge = g.s.GitRepo.Spec.Polling()
	}
	g.polled, g.fresh = false, false
	generation := g.s.Generation
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, gitOptions), a.ResolveCommit, in).Get(ctx, &res)
	g.resolved++
	g.upsertRepoKey(ctx)
	if err != nil {
		g.resolveFailed(ctx, err)
		return
	}
	if g.s.PollFailures > 0 && g.backoff {
		g.pollReset++ // a backed-off timer may still be running: back to the normal pace
	}
	g.s.PollFailures = 0
	g.s.NextCheck, g.s.NextCheckReason = time.Time{}, ""
	g.s.GitWarnings = res.Warnings
	if g.s.GitFailed {
		// The remote answers again. Runs before versionLongLived rolled
		// out again even when the commit had not changed.
		g.s.Error, g.s.GitFailed = "", false
		if !g.longLived {
			g.s.Dirty = true
		}
	}
	if res.Rejected != nil {
		// Not deployed: the last accepted commit stays LatestCommit.
		g.s.Rejected = res.Rejected
		g.upsert(ctx)
		return
	}
	g.take(ctx, in, res, generation)
}

// take acts on an accepted commit: a new one is due for a rollout, or,
// when it changes nothing the GitRepo reads since in.Since (and neither
// the spec nor the Since moved meanwhile), is the GitRepo's commit at once.
func (g *gitRepo) take(ctx workflow.Context, in activities.ResolveInput, res activities.ResolveResult, generation int64) {
	if res.Commit != g.s.LatestCommit {
		g.s.Rejected = nil
	}
	g.s.Verified = res.Verified
	current := g.s.Commit
	if g.running != "" {
		current = g.cur.Commit
	}
	failed := res.Commit == g.s.FailedCommit && g.s.Generation == g.s.FailedGeneration
	// A pinned GitRepo records the remote's commit but rolls out only the
	// pinned one.
	if res.Commit != current && !failed && g.s.Pin == nil {
		unchanged := res.Unchanged && in.Since != "" && in.Since == g.since() && generation == g.s.Generation
		switch {
		case unchanged && g.running != "":
			// Nothing the GitRepo reads changed since the running
			// rollout's commit: it goes on, and the commit is the
			// GitRepo's when it ends (takeFollow).
			g.s.Follow = &FollowCommit{Commit: res.Commit, Since: in.Since, Generation: generation}
		case unchanged:
			// Nothing the GitRepo reads changed: the commit is its
			// commit now, without a render or a rollout.
			g.s.RenderedCommit = in.Since
			g.s.Commit = res.Commit
			g.upsert(ctx)
		default:
			g.s.Dirty = true
			g.found()
		}
	}
	g.s.CheckTrigger = nil
	if res.Commit != g.s.LatestCommit {
		g.s.LatestCommitSeen = workflow.Now(ctx)
	}
	g.s.LatestCommit = res.Commit
}

// resolveFailed records a failed check of the remote. A Git host that
// asked to wait (activities.ErrTypeGitRateLimited) is not asked again
// before the time it gave.
func (g *gitRepo) resolveFailed(ctx workflow.Context, err error) {
	prefix := "git: "
	if g.helmOp() {
		prefix = "chart: "
	}
	g.s.Error, g.s.GitFailed = prefix+activityMessage(err), true
	g.s.PollFailures++
	var appErr *temporal.ApplicationError
	var rl activities.RateLimit
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeGitRateLimited && appErr.HasDetails() && appErr.Details(&rl) == nil {
		g.s.NextCheck, g.s.NextCheckReason = rl.RetryAt, rl.Host+": "+rl.Reason
		g.pollReset++ // the timer running now may be shorter than the wait
	}
	g.upsert(ctx)
}

// since is the commit a new commit is compared with, so that one that
// changes nothing the GitRepo reads needs no render or rollout: the
// commit the deployments were rendered from, when they are settled on
// this spec. Empty (no comparison) while anything else is due or in
// flight, after a failure, and for HelmOps.
func (g *gitRepo) since() string {
	s := &g.s
	if g.running != "" {
		return g.runningSince()
	}
	if g.helmOp() || s.Dirty || s.Commit == "" || s.ObservedGeneration != s.Generation ||
		(s.Error != "" && !s.GitFailed) || len(s.Halts) > 0 || s.Repair || s.Pin != nil {
		return ""
	}
	if s.RenderedCommit != "" {
		return s.RenderedCommit
	}
	return s.Commit
}

// runningSince is the commit a new commit is compared with while a
// rollout runs: the commit it rolls out, when it rolls out the GitRepo's
// spec and newest commit as a poll found it (not a sync's repair, a
// rollback, or a rollout something newer is due to supersede). Empty
// before versionFollowUnchanged.
func (g *gitRepo) runningSince() string {
	s := &g.s
	if !g.follow || g.helmOp() || g.superseding || s.Dirty || g.cur.Repair || s.Pin != nil ||
		g.cur.Generation != s.Generation || g.cur.Commit == "" {
		return ""
	}
	return g.cur.Commit
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
		g.due(history.Trigger{Kind: history.TriggerRetry})
		if g.longLived {
			g.s.RetryDue = true // waits for a running rollout, never supersedes it
		} else {
			g.s.Dirty = true
		}
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
