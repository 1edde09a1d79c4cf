package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
)

// Limits of a plan, which travels through the workflow's history.
const (
	// planPickup is how long a cluster's agent may leave its Plan task
	// unanswered before the cluster is planned offline.
	planPickup = 10 * time.Second
	// maxPlanDiff is the most of one object's diff a plan keeps.
	maxPlanDiff = 16 << 10
	// maxPlanSize is the most a plan's JSON may weigh: over it, diffs are
	// left out, largest first.
	maxPlanSize = 1 << 20
)

// Options of the plan's activities.
var (
	// planBaseOptions: the query of the GitRepo's workflow.
	planBaseOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrTypeGitRepoNotFound}},
	}
	// planClusterOptions: the Plan activity on a cluster. An agent that
	// does not pick it up in planPickup is planned offline instead.
	planClusterOptions = workflow.ActivityOptions{
		ScheduleToStartTimeout: planPickup,
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2,
			NonRetryableErrorTypes: []string{activities.ErrTypeClusterUnreachable, activities.ErrTypeClusterUnauthorized}},
	}
	// planOfflineOptions: PlanOffline on the controller.
	planOfflineOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	}
)

// PlanWorkflow says what rolling req's change out would do on each
// cluster its GitRepo targets (plan.Request; IDs "plan/<ns>/<name>/<unique>").
// It reads the GitRepo's spec, commit and inventory, renders the change
// (a commit, a branch's head, a ref, or a directory's archive), targets
// it, and asks each cluster for a dry run (activities.Plan on its queue);
// a cluster that cannot be reached is planned offline on the controller
// against what the GitRepo's current commit deploys there. Nothing is
// applied anywhere, and the GitRepo is not told.
func PlanWorkflow(ctx workflow.Context, req plan.Request) (plan.Result, error) {
	ref := activities.GitRepoRef{Namespace: req.Namespace, Name: req.Name}
	p := &planRun{req: req, ref: ref, id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	// Step 1. What the GitRepo runs now.
	var a *activities.Activities
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, planBaseOptions), a.ReadPlanBase, ref).Get(ctx, &p.base); err != nil {
		return plan.Result{}, err
	}
	p.ref.Kind = p.base.Kind
	p.res = plan.Result{GitRepo: p.ref.String(), Base: p.base.Commit, Source: req.Source, Clusters: []plan.Cluster{}}
	if p.base.Paused {
		p.warn("%s is paused: nothing rolls out until `flotilla resume`", p.ref.Title())
	}
	// Step 2. The change: render and target it.
	if err := p.resolve(ctx); err != nil {
		return plan.Result{}, err
	}
	bundles, err := p.render(ctx)
	if err != nil {
		return plan.Result{}, err
	}
	targets, err := p.target(ctx, p.targetCommit(), bundles)
	if err != nil {
		return plan.Result{}, err
	}
	// Step 3. Ask the clusters.
	p.fanOut(ctx, p.works(targets))
	p.res.Sort()
	boundPlan(&p.res)
	return p.res, nil
}

// planRun carries one PlanWorkflow's state.
type planRun struct {
	req  plan.Request
	ref  activities.GitRepoRef
	id   string
	base activities.PlanBase
	res  plan.Result
	// current is what the GitRepo's current commit deploys on each
	// cluster (computed once, when a cluster is planned offline).
	current     map[string][]activities.Bundle
	currentDone bool
}

// planWork is one cluster to plan.
type planWork struct {
	cluster activities.PlanInput
	agent   bool
	// failed are bundles that could not be computed for the cluster.
	failed []plan.Release
}

func (p *planRun) warn(format string, args ...any) {
	p.res.Warnings = append(p.res.Warnings, fmt.Sprintf(format, args...))
}

// resolve decides the commit planned: the request's commit (a full hash,
// or an abbreviation of a commit the GitRepo knows), the head of its ref
// or branch, or the GitRepo's own branch now. A --path archive is
// rendered in place of the tree; it is named by its digest.
func (p *planRun) resolve(ctx workflow.Context) error {
	req := p.req
	switch {
	case len(req.Archive) > 0:
		sum := sha256.Sum256(req.Archive)
		p.res.Commit = "local:" + hex.EncodeToString(sum[:])[:12]
		if p.res.Source == "" {
			p.res.Source = "path " + req.Path
		}
		return nil
	case req.Commit != "":
		full, err := p.expand(req.Commit)
		if err != nil {
			return err
		}
		p.res.Commit = full
		if p.res.Source == "" {
			p.res.Source = "commit"
		}
		return nil
	}
	spec := p.base.Spec
	switch {
	case req.Ref != "":
		spec.Branch, spec.Revision = "", req.Ref
		p.defaultSource("ref " + req.Ref)
	case req.Branch != "":
		spec.Branch, spec.Revision = req.Branch, ""
		p.defaultSource("branch " + req.Branch)
	}
	var a *activities.Activities
	var res activities.ResolveResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, gitOptions), a.ResolveCommit,
		activities.ResolveInput{GitRepo: p.ref, Spec: spec}).Get(ctx, &res); err != nil {
		return err
	}
	if res.Rejected != nil {
		p.warn("commit %s is refused by spec.verify: %s", res.Commit, res.Rejected.Reason)
	}
	p.res.Commit = res.Commit
	return nil
}

func (p *planRun) defaultSource(s string) {
	if p.res.Source == "" {
		p.res.Source = s
	}
}

// expand returns the full hash of commit: itself when it is one, else the
// GitRepo's current or latest commit when it abbreviates it.
func (p *planRun) expand(commit string) (string, error) {
	c := strings.ToLower(commit)
	if len(c) == 40 {
		return c, nil
	}
	for _, known := range []string{p.base.Commit, p.base.LatestCommit} {
		if len(c) >= 7 && known != "" && strings.HasPrefix(known, c) {
			return known, nil
		}
	}
	return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"GitRepo %s: commit %q: give the full 40-hex hash (only the GitRepo's current and latest commits are known by an abbreviation of 7 or more digits)",
		p.ref, commit), activities.ErrTypeRefNotFound, nil)
}

// targetCommit is the commit TargetBundles renders the change again from
// when its store misses it: the base's for an archive (which has none).
func (p *planRun) targetCommit() string {
	if len(p.req.Archive) > 0 {
		return p.base.Commit
	}
	return p.res.Commit
}

// render renders the change's bundles: the commit's, or the archive's.
func (p *planRun) render(ctx workflow.Context) ([]activities.Bundle, error) {
	var a *activities.Activities
	var out activities.RenderResult
	in := activities.RenderInput{GitRepo: p.ref, Spec: p.base.Spec, Commit: p.res.Commit}
	ctx = workflow.WithActivityOptions(ctx, renderOptions)
	var err error
	if len(p.req.Archive) > 0 {
		in.Commit = p.base.Commit
		err = workflow.ExecuteActivity(ctx, a.RenderArchive, activities.RenderArchiveInput{RenderInput: in, Archive: p.req.Archive}).Get(ctx, &out)
	} else {
		err = workflow.ExecuteActivity(ctx, a.Render, in).Get(ctx, &out)
	}
	for _, b := range out.Bundles {
		for _, w := range b.Warnings {
			p.warn("bundle %s: %s", b.Name, w)
		}
	}
	return out.Bundles, err
}

// target finds the clusters each bundle goes to, with their options.
func (p *planRun) target(ctx workflow.Context, commit string, bundles []activities.Bundle) (activities.TargetsResult, error) {
	var a *activities.Activities
	var targets activities.TargetsResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.TargetBundles,
		activities.BundleTargetsInput{GitRepo: p.ref, Spec: p.base.Spec, Commit: commit, Bundles: bundles}).Get(ctx, &targets)
	return targets, err
}

// works decides what each cluster is asked: the bundles it would get and
// the releases it runs that the change drops (planWorks).
func (p *planRun) works(targets activities.TargetsResult) []planWork {
	works, warnings := planWorks(targets, p.base.Inventory, p.req.Clusters, p.ref.Name)
	p.res.Warnings = append(p.res.Warnings, warnings...)
	for i := range works {
		works[i].cluster.GitRepo, works[i].cluster.Commit, works[i].cluster.WorkflowID = p.ref, p.res.Commit, p.id
	}
	return works
}

// planWorks is works' pure core. A release kept by keepResources when
// dropped is not uninstalled, so it is not in Remove; releases on a
// paused cluster, or of a bundle that could not be computed there, stay
// as they are (rollout.MakePlan decides, as for a rollout). only, when
// set, restricts the clusters. Works come sorted by cluster.
func planWorks(targets activities.TargetsResult, inv []rollout.InventoryEntry, only []string, name string) ([]planWork, []string) {
	mp := rollout.MakePlan(targets, inv, rollout.PlanOptions{Name: name})
	ws := &workSet{agents: set(targets.Agents), only: only, byName: map[string]*planWork{}}
	var warnings []string
	for _, tc := range targets.Matched {
		if w := ws.get(tc.Name); w != nil {
			w.cluster.Bundles = append(w.cluster.Bundles, tc.Bundles...)
			if tc.Paused {
				warnings = append(warnings, fmt.Sprintf("cluster %s is paused: it keeps what it runs until it is resumed", tc.Name))
			}
		}
	}
	for _, cw := range mp.Work {
		for _, e := range cw.Cleanup {
			if e.KeepResources {
				continue
			}
			if w := ws.get(cw.Cluster); w != nil {
				w.cluster.Remove = append(w.cluster.Remove, activities.Release{Bundle: e.Bundle, Release: e.Release,
					Namespace: e.Namespace, DeleteNamespace: e.DeleteNamespace})
			}
		}
	}
	for _, d := range targets.Errors {
		if w := ws.get(d.Cluster); w != nil {
			w.failed = append(w.failed, plan.Release{Bundle: d.Bundle, Release: d.Release, Namespace: d.Namespace,
				Action: plan.Unchanged, Error: d.Message})
		}
	}
	for _, h := range mp.Holds {
		warnings = append(warnings, h.Message)
	}
	return ws.sorted(), warnings
}

// workSet gathers the planWorks by cluster.
type workSet struct {
	agents map[string]bool
	only   []string
	byName map[string]*planWork
	names  []string
}

// get returns cluster c's work, nil for a cluster the plan leaves out.
func (ws *workSet) get(c string) *planWork {
	if len(ws.only) > 0 && !slices.Contains(ws.only, c) {
		return nil
	}
	if w, ok := ws.byName[c]; ok {
		return w
	}
	w := &planWork{cluster: activities.PlanInput{Cluster: c, Bundles: []activities.Bundle{}}, agent: ws.agents[c]}
	ws.byName[c] = w
	ws.names = append(ws.names, c)
	return w
}

func (ws *workSet) sorted() []planWork {
	slices.Sort(ws.names)
	out := make([]planWork, 0, len(ws.names))
	for _, n := range ws.names {
		out = append(out, *ws.byName[n])
	}
	return out
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// fanOut plans every cluster at once on its own queue, then those that
// could not be reached offline, and adds each cluster's plan to the result.
func (p *planRun) fanOut(ctx workflow.Context, works []planWork) {
	var ca *activities.ClusterActivities
	futures := make([]workflow.Future, len(works))
	for i, w := range works {
		opts := planClusterOptions
		opts.TaskQueue = workflow.GetInfo(ctx).TaskQueueName
		if w.agent {
			opts.TaskQueue = protocol.ClusterQueue(w.cluster.Cluster)
		}
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ca.Plan, w.cluster)
	}
	results := make([]plan.Cluster, len(works))
	reasons := make([]string, len(works)) // why a cluster is planned offline
	for i, f := range futures {
		err := f.Get(ctx, &results[i])
		if reason, ok := unreachable(works[i], err); ok {
			reasons[i] = reason
		} else if err != nil {
			results[i] = plan.Cluster{Name: works[i].cluster.Cluster, Error: clusterError(works[i].cluster.Cluster, works[i].agent, err)}
		}
	}
	p.planOffline(ctx, works, reasons, results)
	for i, c := range results {
		c.Name = works[i].cluster.Cluster
		c.Releases = append(c.Releases, works[i].failed...)
		if c.Releases == nil {
			c.Releases = []plan.Release{}
		}
		p.res.Clusters = append(p.res.Clusters, c)
	}
}

// planOffline plans on the controller, at once, each cluster with a
// reason, into results.
func (p *planRun) planOffline(ctx workflow.Context, works []planWork, reasons []string, results []plan.Cluster) {
	var a *activities.Activities
	futures := make([]workflow.Future, len(works))
	for i, w := range works {
		if reasons[i] == "" {
			continue
		}
		in := activities.PlanOfflineInput{PlanInput: w.cluster, Reason: reasons[i], Current: p.currentBundles(ctx)[w.cluster.Cluster]}
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, planOfflineOptions), a.PlanOffline, in)
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		if err := f.Get(ctx, &results[i]); err != nil {
			results[i] = plan.Cluster{Name: works[i].cluster.Cluster, Offline: true, Reason: reasons[i], Error: activityMessage(err)}
		}
	}
}

// unreachable reports whether err means w's cluster could not be asked
// (its API server did not answer or refused the credentials, its agent
// did not pick the task up), and why, naming the cluster.
func unreachable(w planWork, err error) (string, bool) {
	c := w.cluster.Cluster
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		if w.agent {
			return fmt.Sprintf("cluster %s: its agent did not pick the plan up in %s (agent offline)", c, planPickup), true
		}
		return fmt.Sprintf("cluster %s: no controller worker picked the plan up in %s", c, planPickup), true
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		msg := strings.TrimPrefix(ae.Message(), "cluster "+c+": ")
		switch ae.Type() {
		case activities.ErrTypeClusterUnreachable:
			return fmt.Sprintf("cluster %s unreachable: %s", c, msg), true
		case activities.ErrTypeClusterUnauthorized:
			return fmt.Sprintf("cluster %s refused the credentials: %s", c, msg), true
		}
	}
	return "", false
}

// currentBundles is what the GitRepo's current commit deploys on each
// cluster, rendered and targeted once (nil when it has no commit yet or
// it cannot be rendered, which a warning says).
func (p *planRun) currentBundles(ctx workflow.Context) map[string][]activities.Bundle {
	if p.currentDone {
		return p.current
	}
	p.currentDone = true
	if p.base.Commit == "" {
		return nil
	}
	var a *activities.Activities
	var out activities.RenderResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, renderOptions), a.Render,
		activities.RenderInput{GitRepo: p.ref, Spec: p.base.Spec, Commit: p.base.Commit}).Get(ctx, &out)
	var targets activities.TargetsResult
	if err == nil {
		targets, err = p.target(ctx, p.base.Commit, out.Bundles)
	}
	if err != nil {
		p.warn("offline clusters are compared with nothing: rendering the current commit %s failed: %s", p.base.Commit, activityMessage(err))
		return nil
	}
	p.current = map[string][]activities.Bundle{}
	for _, tc := range targets.Matched {
		p.current[tc.Name] = tc.Bundles
	}
	return p.current
}

// boundPlan keeps res within what a workflow result may carry: each
// object's diff cut at maxPlanDiff lines' worth ("… N more lines"), and,
// while the whole is over maxPlanSize, the largest remaining diff left
// out.
func boundPlan(res *plan.Result) {
	type at struct{ c, r, o int }
	var diffs []at
	for ci := range res.Clusters {
		for ri := range res.Clusters[ci].Releases {
			objs := res.Clusters[ci].Releases[ri].Objects
			for oi := range objs {
				objs[oi].Diff = capDiff(objs[oi].Diff, maxPlanDiff)
				if objs[oi].Diff != "" {
					diffs = append(diffs, at{ci, ri, oi})
				}
			}
		}
	}
	obj := func(x at) *plan.Object { return &res.Clusters[x.c].Releases[x.r].Objects[x.o] }
	slices.SortStableFunc(diffs, func(x, y at) int { return len(obj(y).Diff) - len(obj(x).Diff) })
	size := planSize(*res)
	for _, x := range diffs {
		if size <= maxPlanSize {
			return
		}
		o := obj(x)
		size -= len(o.Diff)
		o.Diff = "(diff left out: the plan is over 1 MiB)"
	}
}

// capDiff cuts diff after the line that crosses max bytes, noting how many
// lines were left out.
func capDiff(diff string, max int) string {
	if len(diff) <= max {
		return diff
	}
	cut := strings.LastIndexByte(diff[:max], '\n') + 1
	rest := strings.Count(strings.TrimRight(diff[cut:], "\n"), "\n") + 1
	return diff[:cut] + fmt.Sprintf("… %d more lines\n", rest)
}

func planSize(res plan.Result) int {
	b, err := json.Marshal(res) //workflowcheck:ignore a plan holds no maps: the same size on every replay
	if err != nil {
		return 0 // a plan always marshals: only strings, slices and bools
	}
	return len(b)
}
