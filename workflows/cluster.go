package workflows

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// ClusterInput starts (or continues) a cluster's entity workflow.
type ClusterInput struct {
	// ClusterStart is what clients start the workflow with.
	protocol.ClusterStart
	// Notified is false until the GitRepos have heard of the cluster.
	Notified bool `json:"notified,omitempty"`
	// EnsureAgent carries a pending managed-agent check across
	// continue-as-new.
	EnsureAgent bool `json:"ensureAgent,omitempty"`
	// Watch carries the GitRepos' watch sets across continue-as-new.
	Watch []protocol.WatchSet `json:"watch,omitempty"`
	// Kubeconfig is the cluster's sealed kubeconfig (push mode or a
	// managed agent), carried across continue-as-new.
	Kubeconfig *seal.Box `json:"kubeconfig,omitempty"`
	// ContactTold carries the GitRepos told the cluster is out of contact
	// (contactWatch) across continue-as-new.
	ContactTold []string `json:"contactTold,omitempty"`
	// OfflineTold carries whether ClusterOffline was the last contact
	// event emitted (contactEvents) across continue-as-new.
	OfflineTold bool `json:"offlineTold,omitempty"`
}

// ClusterWorkflow is the entity workflow of one registered cluster (ID
// cluster/<name>): its labels and registration. Every change that can
// alter targeting tells the GitRepos, which re-evaluate their targets.
// `flotilla cluster remove` ends it.
func ClusterWorkflow(ctx workflow.Context, in ClusterInput) error {
	c := &clusterEntity{rec: in.Record, kubeconfig: in.Kubeconfig}
	c.e = entity{notifyDue: !in.Notified, waitFor: workflow.GetInfo(ctx).WorkflowExecution.ID}
	c.ag = &agentWatch{rec: &c.rec, ensureDue: in.EnsureAgent, notify: func() { c.e.notifyDue = true }}
	c.w = &clusterWatch{name: in.Record.Name, rec: &c.rec, sets: in.Watch, silent: c.ag.watchSilent}
	c.ct = &contactWatch{rec: &c.rec, sets: &c.w.sets, watch: &c.w.token, told: in.ContactTold}
	c.ce = &contactEvents{rec: &c.rec, events: &c.events, offline: in.OfflineTold}
	c.e.busy = func() bool { return c.ag.pending() || c.w.pending() || c.ct.pending() }
	if targetingMemo(ctx) {
		// GitRepos are told of a change once visibility shows it in the
		// targeting memo, which is what their rollouts list.
		c.e.generation = func() int64 { return c.rec.Generation }
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.ClusterRecord, error) { return c.rec, nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryKubeconfig, func() (*seal.Box, error) { return c.kubeconfig, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply, c.apply,
		workflow.UpdateHandlerOptions{Validator: c.validateApply}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateLabel, c.label,
		workflow.UpdateHandlerOptions{Validator: c.validateLabel}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateDownstream, c.downstream,
		workflow.UpdateHandlerOptions{Validator: c.validateDownstream}); err != nil {
		return err
	}
	upsertCluster(ctx, c.rec)
	c.ag.start(ctx)
	c.w.start(ctx)
	c.ct.start(ctx)
	c.ce.start(ctx)
	removed, err := c.e.run(ctx, func() {
		c.rec.Removed = true
		if c.e.generation != nil {
			c.rec.Generation++
			upsertTargeting(ctx, c.rec)
		}
	})
	if removed {
		// GitRepos told the cluster was lost hear it is gone: a cluster
		// added again under its name starts afresh.
		c.ct.flush(ctx)
	}
	if err != nil || removed {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, ClusterWorkflow, ClusterInput{ClusterStart: protocol.ClusterStart{Record: c.rec},
		Notified: !c.e.notifyDue, EnsureAgent: c.ag.ensureDue, Watch: c.w.sets, Kubeconfig: c.kubeconfig,
		ContactTold: c.ct.told, OfflineTold: c.ce.offline})
}

// clusterEntity is the state of one ClusterWorkflow run.
type clusterEntity struct {
	rec protocol.ClusterRecord
	// kubeconfig is sealed; it is never part of the record.
	kubeconfig *seal.Box
	e          entity
	ag         *agentWatch
	w          *clusterWatch
	ct         *contactWatch
	ce         *contactEvents
	// events emits the cluster's notify.Events.
	events notifier
}

// apply takes a registration or an update of the cluster.
func (c *clusterEntity) apply(ctx workflow.Context, a protocol.ClusterApply) (protocol.ClusterRecord, error) {
	next := c.rec
	if a.SetLabels {
		next.Labels = maps.Clone(a.Labels)
		next.Annotations, next.TemplateValues = maps.Clone(a.Annotations), a.TemplateValues
	}
	if a.Paused != nil {
		next.Paused = *a.Paused
	}
	if a.KubeconfigHash != "" {
		next.KubeconfigHash, next.Context = a.KubeconfigHash, a.Context
	}
	if a.Kubeconfig != nil {
		c.kubeconfig = a.Kubeconfig
	}
	if a.Agent != nil {
		next.Agent = applyAgent(ctx, c.rec.Agent, *a.Agent)
	}
	// New agent settings are checked by EnsureAgent, which deploys only
	// when the agent's effective hash changes.
	settingsApplied := a.AgentSettings != nil && next.Agent != nil && next.Agent.Managed
	if settingsApplied {
		agent := *next.Agent
		agent.Config = a.AgentSettings.Apply(agent.Config)
		next.Agent = &agent
	}
	kubeconfigChanged := next.KubeconfigHash != c.rec.KubeconfigHash
	c.e.change(ctx, &c.rec, next)
	if kubeconfigChanged && workflow.GetVersion(ctx, versionContact, workflow.DefaultVersion, 1) == 1 {
		c.w.gen++ // the watch (and its probe) connects anew
	}
	if a.Agent != nil && a.Agent.Managed || settingsApplied || kubeconfigChanged && c.ag.managed() {
		c.ag.ensureDue = true
	}
	return c.rec, nil
}

func (c *clusterEntity) validateApply(ctx workflow.Context, a protocol.ClusterApply) error {
	rec := c.rec
	if a.Agent != nil && a.Agent.TokenID != "" && rec.Generation > 0 && !rec.Removed &&
		(rec.Agent == nil || rec.Agent.TokenID != a.Agent.TokenID) {
		how := "already registered with another token"
		if !rec.PullMode() {
			how = "registered in push mode"
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %q is %s; a registration token cannot take over an existing cluster: remove it first (flotilla cluster remove %s)",
			rec.Name, how, rec.Name), "InvalidSpec", nil)
	}
	if err := validateAgentSettings(rec, a); err != nil {
		return err
	}
	if a.Agent != nil && a.Agent.Managed && a.KubeconfigHash == "" && rec.KubeconfigHash == "" {
		return temporal.NewNonRetryableApplicationError("cluster "+rec.Name+": a managed agent is installed through the cluster's kubeconfig; add it with --kubeconfig", "InvalidSpec", nil)
	}
	if a.Kubeconfig != nil && (a.Kubeconfig.IsZero() || a.KubeconfigHash == "") {
		return temporal.NewNonRetryableApplicationError("cluster "+rec.Name+": a sealed kubeconfig comes with its hash", "InvalidSpec", nil)
	}
	return validateLabels(rec.Name, a.Labels)
}

// validateAgentSettings accepts agent settings only for a cluster whose
// agent Flotilla installs, and upgrade windows that parse.
func validateAgentSettings(rec protocol.ClusterRecord, a protocol.ClusterApply) error {
	managed := rec.Agent != nil && rec.Agent.Managed || a.Agent != nil && a.Agent.Managed
	if a.AgentSettings != nil && !managed {
		return temporal.NewNonRetryableApplicationError("cluster "+rec.Name+": agentNamespace, agentEnvVars, agentTolerations, agentAffinity, agentResources and agentUpgradeWindows "+
			"configure the agent Flotilla installs; add the cluster with `flotilla cluster add "+rec.Name+" --kubeconfig FILE --install-agent` first", "InvalidSpec", nil)
	}
	if a.AgentSettings != nil {
		for i, w := range a.AgentSettings.UpgradeWindows {
			if _, err := fleetyaml.Window(w).Parse(); err != nil {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %s: agentUpgradeWindows[%d]: %v", rec.Name, i, err), "InvalidSpec", nil)
			}
		}
	}
	return nil
}

// downstreamOptions: a controller reads and seals the Secrets and
// ConfigMaps a bundle copies to a pull-mode cluster while its agent waits.
var downstreamOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 20 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, MaximumAttempts: 3,
		NonRetryableErrorTypes: []string{activities.ErrTypeDownstreamMissing, activities.ErrTypeDownstreamChanged}},
}

// downstream answers the cluster's agent with the Secrets and ConfigMaps
// a bundle copies there, sealed by a controller to the key the agent
// published: the box is all the history holds. The controller checks
// them against the digest the bundle's options carry for this cluster.
func (c *clusterEntity) downstream(ctx workflow.Context, req protocol.DownstreamRequest) (seal.Box, error) {
	var a *activities.Activities
	var box seal.Box
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, downstreamOptions), a.SealDownstream,
		activities.SealDownstreamInput{Request: req}).Get(ctx, &box)
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		// The agent reads the type: a missing source fails its bundle.
		return box, temporal.NewNonRetryableApplicationError(ae.Message(), ae.Type(), nil)
	}
	return box, err
}

// validateDownstream accepts requests for this cluster, sealed to the key
// its agent published.
func (c *clusterEntity) validateDownstream(ctx workflow.Context, req protocol.DownstreamRequest) error {
	a := c.rec.Agent
	switch {
	case req.Cluster != c.rec.Name || c.rec.Removed:
		return temporal.NewNonRetryableApplicationError("downstreamResources of cluster "+req.Cluster+" asked of cluster "+c.rec.Name, "InvalidSpec", nil)
	case a == nil || a.SealKey == nil:
		return temporal.NewNonRetryableApplicationError("cluster "+c.rec.Name+": its agent has not published a key yet (it does with every heartbeat)", "InvalidSpec", nil)
	case a.SealKey.ID != req.Key.ID || !bytes.Equal(a.SealKey.Key, req.Key.Key):
		return temporal.NewNonRetryableApplicationError("cluster "+c.rec.Name+": the agent's key "+req.Key.ID+
			" is not the one it published last ("+a.SealKey.ID+"); it is published with the next heartbeat", "InvalidSpec", nil)
	}
	return nil
}

// label sets and removes labels of the cluster.
func (c *clusterEntity) label(ctx workflow.Context, l protocol.ClusterLabel) (protocol.ClusterRecord, error) {
	next := c.rec
	next.Labels = maps.Clone(c.rec.Labels)
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	maps.Copy(next.Labels, l.Set)
	for _, k := range l.Remove {
		delete(next.Labels, k)
	}
	c.e.change(ctx, &c.rec, next)
	return c.rec, nil
}

func (c *clusterEntity) validateLabel(ctx workflow.Context, l protocol.ClusterLabel) error {
	return validateLabels(c.rec.Name, l.Set)
}

// upsertCluster shows rec in the cluster's search attributes and, from
// versionTargetingMemo on, its targeting memo.
func upsertCluster(ctx workflow.Context, rec protocol.ClusterRecord) {
	upsertTargeting(ctx, rec)
	state := "Active"
	switch {
	case rec.Paused:
		state = "Paused"
	case rec.Agent != nil && rec.Agent.Offline, rec.Unreachable != nil:
		state = "Offline"
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		temporalx.KeyCluster.ValueSet([]string{rec.Name}),
		temporalx.KeyState.ValueSet(state))
}

func validateLabels(cluster string, labels map[string]string) error {
	errs := api.ValidateLabels(labels, field.NewPath("metadata", "labels")) //workflowcheck:ignore validation only reads its input
	if len(errs) == 0 {
		return nil
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	return temporal.NewNonRetryableApplicationError((&api.ValidationError{Kind: api.KindCluster, Name: cluster, Errs: errs}).Error(), "InvalidSpec", nil)
}

// ClusterGroupInput starts (or continues) a cluster group's workflow.
type ClusterGroupInput struct {
	// GroupStart is what clients start the workflow with.
	protocol.GroupStart
	Notified bool `json:"notified,omitempty"`
}

// ClusterGroupWorkflow is the entity workflow of one cluster group (ID
// clustergroup/<name>), a named label selector. Changes re-evaluate the
// targets of every GitRepo; the delete signal ends it.
func ClusterGroupWorkflow(ctx workflow.Context, in ClusterGroupInput) error {
	rec := in.Record
	e := entity{notifyDue: !in.Notified, waitFor: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.GroupRecord, error) { return rec, nil }); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply,
		func(ctx workflow.Context, g api.ClusterGroup) (protocol.GroupRecord, error) {
			next := rec
			next.Labels, next.Selector = g.Metadata.Labels, g.Spec.Selector
			e.change(ctx, &rec, next)
			return rec, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, g api.ClusterGroup) error {
			if g.Metadata.Name != rec.Name {
				return temporal.NewNonRetryableApplicationError("ClusterGroup "+g.Metadata.Name+" sent to the workflow of "+rec.Name, "InvalidSpec", nil)
			}
			//workflowcheck:ignore deterministic: result does not depend on map order
			if err := g.Validate(); err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
			}
			return nil
		}})
	if err != nil {
		return err
	}
	removed, err := e.run(ctx, func() { rec.Removed = true })
	if err != nil || removed {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, ClusterGroupWorkflow, ClusterGroupInput{GroupStart: protocol.GroupStart{Record: rec}, Notified: !e.notifyDue})
}

// entity is the loop shared by cluster and group workflows: apply changes,
// tell GitRepos, end on delete, continue as new when history grows.
type entity struct {
	notifyDue bool
	waitFor   string
	deleted   bool
	// busy, when set, holds continue-as-new while it reports true.
	busy func() bool
	// generation, when set, is the record generation the notification
	// waits for visibility to show (activities.NotifyInput.Generation).
	generation func() int64
}

// notifyInput is the notification of a change (removed: of the removal).
func (e *entity) notifyInput(removed bool) activities.NotifyInput {
	if removed {
		in := activities.NotifyInput{Reason: "removed " + e.waitFor}
		if e.generation != nil {
			in.WaitFor, in.Generation, in.Removed = e.waitFor, e.generation(), true
		}
		return in
	}
	in := activities.NotifyInput{WaitFor: e.waitFor, Reason: "changed " + e.waitFor}
	if e.generation != nil {
		in.Generation = e.generation()
	}
	return in
}

// change stores next into *rec when it differs, bumping the generation.
func (e *entity) change(ctx workflow.Context, rec, next any) {
	switch r := rec.(type) {
	case *protocol.ClusterRecord:
		n := next.(protocol.ClusterRecord)
		//workflowcheck:ignore deterministic: result does not depend on map order
		if reflect.DeepEqual(*r, n) {
			return
		}
		n.Generation = r.Generation + 1
		*r = n
		upsertCluster(ctx, n)
	case *protocol.GroupRecord:
		n := next.(protocol.GroupRecord)
		//workflowcheck:ignore deterministic: result does not depend on map order
		if reflect.DeepEqual(*r, n) {
			return
		}
		n.Generation = r.Generation + 1
		*r = n
	}
	e.notifyDue = true
}

// run serves the entity until it is deleted (true) or should continue as
// new (false).
func (e *entity) run(ctx workflow.Context, markRemoved func()) (bool, error) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalDelete).Receive(ctx, nil)
		e.deleted = true
	})
	for {
		if err := workflow.Await(ctx, func() bool {
			return e.notifyDue || e.deleted || historyFull(ctx)
		}); err != nil {
			return false, err
		}
		if e.deleted {
			markRemoved()
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return false, err
			}
			// Tell GitRepos so they stop targeting it; queries now answer
			// Removed.
			err := notifyGitRepos(ctx, e.notifyInput(true))
			return true, err
		}
		if e.notifyDue {
			e.notifyDue = false
			if err := notifyGitRepos(ctx, e.notifyInput(false)); err != nil {
				return false, err
			}
			continue
		}
		if err := workflow.Await(ctx, func() bool {
			return workflow.AllHandlersFinished(ctx) && (e.busy == nil || !e.busy())
		}); err != nil {
			return false, err
		}
		if workflow.GetSignalChannel(ctx, protocol.SignalDelete).ReceiveAsync(nil) {
			e.deleted = true // arrived with the history limit: act on it here
			continue
		}
		return false, nil
	}
}

// notifyGitRepos signals every GitRepo to re-evaluate its targets.
func notifyGitRepos(ctx workflow.Context, in activities.NotifyInput) error {
	var a *activities.Activities
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.NotifyGitRepos, in).Get(ctx, nil)
}

// upsertTargeting keeps rec, as targeting reads it, in the targeting memo
// (from versionTargetingMemo on).
func upsertTargeting(ctx workflow.Context, rec protocol.ClusterRecord) {
	if targetingMemo(ctx) {
		_ = workflow.UpsertMemo(ctx, map[string]any{protocol.MemoTargeting: rec.Targeting()})
	}
}

// targetingMemo reports whether the run keeps its record in the targeting
// memo (versionTargetingMemo).
func targetingMemo(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionTargetingMemo, workflow.DefaultVersion, 1) == 1
}
