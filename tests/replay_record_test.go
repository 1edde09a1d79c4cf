package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/policy"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv/devtemporal"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
	"github.com/flotilla-gitops/flotilla/workflows"
)

// TestRecordReplayHistories records the histories that
// workflows/replay_test.go replays: every workflow type, in the states a
// controller upgrade may find it (finished, and still running), run by the
// code of the checkout on a real embedded Temporal server. Activities are
// fakes registered under the real activity names: replay never runs an
// activity, only the results recorded in the history matter.
//
// It writes <type>-<commit>-<scenario>.json into $FLOTILLA_RECORD_REPLAY
// and is skipped without it (see docs/development.md):
//
//	FLOTILLA_RECORD_REPLAY=$PWD/workflows/testdata/replay go test -count=1 -run TestRecordReplayHistories ./tests/
func TestRecordReplayHistories(t *testing.T) {
	dir := os.Getenv("FLOTILLA_RECORD_REPLAY")
	if dir == "" {
		t.Skip("records replay histories for workflows/testdata/replay: set FLOTILLA_RECORD_REPLAY=<output dir> to run")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	out, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	require.NoError(t, err, "the file names carry the commit the histories were recorded from")

	srv := devtemporal.Start(t, devtemporal.Options{})
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	opts, err := temporalx.ClientOptions{Address: srv.FrontendAddress(), Namespace: srv.Namespace()}.ClientConfig(logger)
	require.NoError(t, err)
	opts.Identity = "replay-recorder" // not the host name
	c, err := client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)

	f := &fakes{c: c, repos: map[string]*fakeRepo{}, calls: map[string]int{}, agentDefaults: "fake-defaults-1"}
	w := worker.New(c, protocol.DefaultTaskQueue, worker.Options{})
	registerWorkflows(w)
	w.RegisterActivity(f)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	r := &recorder{c: c, f: f, dir: dir, commit: strings.TrimSpace(string(out)), logger: temporalx.NewLogger(logger)}
	t.Run("gitrepo", r.gitRepos)
	t.Run("rollout", r.rollouts)
	t.Run("rolloutbatch", r.batches)
	t.Run("cluster", r.clusters)
	t.Run("clustergroup", r.groups)
}

// registerWorkflows registers every workflow type the controller runs.
func registerWorkflows(r interface{ RegisterWorkflow(w any) }) {
	r.RegisterWorkflow(workflows.GitRepoWorkflow)
	r.RegisterWorkflow(workflows.RolloutWorkflow)
	r.RegisterWorkflow(workflows.RolloutBatchWorkflow)
	r.RegisterWorkflow(workflows.ClusterWorkflow)
	r.RegisterWorkflow(workflows.ClusterGroupWorkflow)
	r.RegisterWorkflow(workflows.ClusterTokenWorkflow)
}

const recordNamespace = "fleet-default"

// GitRepo scenarios: each GitRepo has its own fake repository, polled
// every pollEvery.
const pollEvery = 2 * time.Second

func (r *recorder) gitRepos(t *testing.T) {
	t.Parallel()
	t.Run("completed", func(t *testing.T) {
		t.Parallel()
		id, c1 := r.rolledOut(t, "app-completed")
		r.waitCalls(t, "ResolveCommit", "app-completed", 3) // two polls
		r.signal(t, id, protocol.SignalDelete, nil)
		r.finish(t, id)
		r.export(t, id, "gitrepo", "completed")
		r.export(t, protocol.RolloutID(recordNamespace, "app-completed", c1, 1)+"-delete", "rollout", "delete")
	})
	t.Run("signals", func(t *testing.T) {
		t.Parallel()
		name := "app-signals"
		id, _ := r.rolledOut(t, name)
		r.signal(t, id, protocol.SignalPause, nil)
		r.waitRepo(t, id, "paused", func(st status.GitRepo) bool { return st.Paused })
		c2 := r.f.setCommit(name, 2)
		r.waitRepo(t, id, "new commit seen while paused", func(st status.GitRepo) bool { return st.LatestCommit == c2 })
		r.signal(t, id, protocol.SignalResume, nil)
		r.waitCommit(t, id, c2)
		r.signal(t, id, protocol.SignalSync, nil)
		r.waitRepo(t, id, "synced", func(st status.GitRepo) bool { return st.Syncs == 1 && st.Settled })
		renders := r.f.callsOf("Render", name)
		r.signal(t, id, protocol.SignalClustersChanged, nil)
		r.waitCalls(t, "Render", name, renders+1)
		r.waitCommit(t, id, c2)
		c3 := r.f.setCommit(name, 3)
		r.signal(t, id, protocol.SignalPush, protocol.Push{Provider: "github", Delivery: "fake-delivery-1",
			Ref: "refs/heads/main", Commit: c3, Authenticated: true})
		r.waitCommit(t, id, c3)
		r.applyRepo(t, name, func(s *api.GitRepoSpec) { s.Paths = []string{"apps", "infra"} })
		r.waitRepo(t, id, "new spec rolled out", func(st status.GitRepo) bool { return st.ObservedGeneration == 2 && st.Settled })
		r.signal(t, id, protocol.SignalDelete, nil)
		r.finish(t, id)
		r.export(t, id, "gitrepo", "pause-resume-sync-push-respec")
	})
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		name := "app-running"
		id, _ := r.rolledOut(t, name)
		r.waitCommit(t, id, r.f.setCommit(name, 2))
		r.waitCalls(t, "ResolveCommit", name, r.f.callsOf("ResolveCommit", name)+2)
		r.export(t, id, "gitrepo", "running")
	})
	t.Run("git-error", func(t *testing.T) {
		t.Parallel()
		name := "app-git-error"
		r.f.add(name, &fakeRepo{clusters: []string{"edge-a", "edge-b"}, bundles: []string{"web"}}) // no commit: the branch is missing
		id := r.applyRepo(t, name, nil)
		r.waitRepo(t, id, "two failed checks", func(st status.GitRepo) bool { return st.PollFailures >= 2 })
		c1 := r.f.setCommit(name, 1)
		r.signal(t, id, protocol.SignalSync, nil)
		r.waitCommit(t, id, c1)
		r.export(t, id, "gitrepo", "git-error-recovered-running")
	})
}

// rolledOut applies the GitRepo name, whose fake repository has bundles
// web and db for edge-a and edge-b, and waits until its first commit is
// rolled out.
func (r *recorder) rolledOut(t *testing.T, name string) (id, commit string) {
	r.f.add(name, &fakeRepo{clusters: []string{"edge-a", "edge-b"}, bundles: []string{"web", "db"}})
	commit = r.f.setCommit(name, 1)
	id = r.applyRepo(t, name, nil)
	r.waitCommit(t, id, commit)
	return id, commit
}

// Rollout scenarios start RolloutWorkflow as a GitRepo does, with an
// inventory of what the commit before deployed.
func (r *recorder) rollouts(t *testing.T) {
	t.Parallel()
	edges := []string{"edge-a", "edge-b", "edge-c"}
	web := func(p strategy.Plan) []activities.BundleStrategy {
		return []activities.BundleStrategy{{Bundle: "web", Plan: p}}
	}
	approval := web(strategy.Plan{MaxUnavailable: 3, FailureThreshold: -1, Partitions: []strategy.Partition{
		{Name: "canary", MaxUnavailable: 1, Clusters: edges[:1]},
		{Name: "prod", MaxUnavailable: 2, RequireApproval: true, Clusters: edges[1:]},
	}})
	for _, sc := range []struct {
		scenario, repo string
		fake           fakeRepo
		// previous are the bundles the commit before deployed everywhere.
		previous []string
		// drive runs the scenario until its history is to be recorded.
		drive func(t *testing.T, id string)
	}{
		{"completed-dependson-cleanup", "rollout-small", fakeRepo{bundles: []string{"web", "db"},
			strategies: []activities.BundleStrategy{{Bundle: "db", Plan: everywhere(),
				DependsOn: []activities.Dependency{{Describe: "web", Bundles: []string{"web"}}}}},
			faults: map[string]fault{"db@edge-c": notReady}}, []string{"web", "db", "legacy"}, r.finish},
		{"halted-rollback", "rollout-halt", fakeRepo{bundles: []string{"web", "db"},
			strategies: web(strategy.Plan{MaxUnavailable: 1, FailureThreshold: 0, RollbackOnFailure: true,
				Partitions: []strategy.Partition{{Name: "all", MaxUnavailable: 1, Clusters: edges}}}),
			faults: map[string]fault{"web@edge-b": errApplied}}, []string{"web", "db"}, func(t *testing.T, id string) {
			var res workflows.RolloutResult
			require.NoError(t, r.c.GetWorkflow(r.ctx(t), id, "").Get(r.ctx(t), &res))
			require.Len(t, res.Halts, 1, "web halts on edge-b")
			require.NotEmpty(t, res.Halts[0].RolledBack, "and edge-a is rolled back")
		}},
		{"approval-waiting-running", "rollout-approval", fakeRepo{bundles: []string{"web"}, strategies: approval},
			[]string{"web"}, r.waitApproval},
		{"approved", "rollout-approved", fakeRepo{bundles: []string{"web"}, strategies: approval}, []string{"web"},
			func(t *testing.T, id string) {
				r.waitApproval(t, id)
				var res protocol.ApproveResult
				require.NoError(t, r.update(t, id, protocol.UpdateApprove, protocol.Approve{Partition: "prod"}, &res))
				require.Equal(t, []string{"web/prod"}, res.Approved)
				r.finish(t, id)
			}},
		{"unreachable-retried", "rollout-unreachable", fakeRepo{bundles: []string{"web"},
			faults: map[string]fault{"web@edge-b": unreachableOnce}}, nil, r.finish},
		{"render-failed", "rollout-invalid", fakeRepo{bundles: []string{"web"},
			invalid: "bundle web: fleet.yaml: helm.chart: chart not found"}, nil, r.finish},
		{"superseded", "rollout-superseded", fakeRepo{bundles: []string{"web"},
			faults: map[string]fault{"web@edge-a": hangsNotReady}}, []string{"web"}, func(t *testing.T, id string) {
			r.waitCalls(t, "WaitReady", "rollout-superseded", 1)
			r.signal(t, id, protocol.SignalSupersede, nil)
			r.finish(t, id)
		}},
	} {
		t.Run(sc.scenario, func(t *testing.T) {
			t.Parallel()
			sc.fake.clusters = edges
			r.f.add(sc.repo, &sc.fake)
			id := r.startRollout(t, sc.repo, previousDeploys(sc.repo, sc.previous, edges))
			sc.drive(t, id)
			r.export(t, id, "rollout", sc.scenario)
		})
	}
}

// batches records a rollout over more clusters than a rollout works
// itself, whose maxUnavailable releases them in several batches.
func (r *recorder) batches(t *testing.T) {
	t.Parallel()
	name := "fleet-large"
	var stores []string
	for i := 1; i <= 55; i++ {
		stores = append(stores, fmt.Sprintf("store-%03d", i))
	}
	r.f.add(name, &fakeRepo{clusters: stores, bundles: []string{"web"}, strategies: []activities.BundleStrategy{{Bundle: "web",
		Plan: strategy.Plan{MaxUnavailable: 30, FailureThreshold: -1, Partitions: []strategy.Partition{{Name: "all", MaxUnavailable: 30, Clusters: stores}}}}}})
	id := r.startRollout(t, name, nil)
	r.finish(t, id)
	r.export(t, id, "rollout", "batched")
	for n := 1; ; n++ {
		batch := fmt.Sprintf("%s/batch-%d", id, n)
		if _, err := r.c.DescribeWorkflowExecution(r.ctx(t), batch, ""); err != nil {
			require.Greater(t, n, 2, "the rollout ran at least two batches")
			break
		}
		r.finish(t, batch)
		r.export(t, batch, "rolloutbatch", fmt.Sprintf("batch-%d", n))
	}
}

// clusters records cluster and registration token workflows; the agent's
// cluster is created by its token's registration.
func (r *recorder) clusters(t *testing.T) {
	t.Parallel()
	push := protocol.ClusterID("edge-push")
	r.applyCluster(t, "edge-push", protocol.ClusterApply{Labels: map[string]string{"env": "prod", "region": "eu"}, SetLabels: true,
		KubeconfigHash: fakeHash("kubeconfig edge-push"), Context: "kind-edge-push"})
	var rec protocol.ClusterRecord
	require.NoError(t, r.update(t, push, protocol.UpdateLabel, protocol.ClusterLabel{Set: map[string]string{"tier": "gold"}, Remove: []string{"region"}}, &rec))
	paused := true
	r.applyCluster(t, "edge-push", protocol.ClusterApply{Paused: &paused})
	r.applyCluster(t, "edge-push", protocol.ClusterApply{Paused: &paused}) // no change

	// A token presented for a cluster registered in push mode: the
	// cluster refuses the registration.
	tok := r.startToken(t, "fakerejected0001", 24*time.Hour)
	err := r.update(t, tok, protocol.UpdateRegister, r.register("fakerejected0001", "edge-push"), &rec)
	require.ErrorContains(t, err, "registered in push mode")
	r.export(t, tok, "clustertoken", "register-rejected")
	// A token that registers a new cluster, edge-agent.
	tok = r.startToken(t, "fakeregistered01", 24*time.Hour)
	require.NoError(t, r.update(t, tok, protocol.UpdateRegister, r.register("fakeregistered01", "edge-agent"), &rec))
	r.finish(t, tok)
	r.export(t, tok, "clustertoken", "registered")

	r.signal(t, push, protocol.SignalDelete, nil)
	r.finish(t, push)
	r.export(t, push, "cluster", "push-labels-paused-removed")

	// The registered agent heartbeats, goes silent (Offline) and comes back.
	agent := protocol.ClusterID("edge-agent")
	beat := func() {
		r.signal(t, agent, protocol.SignalHeartbeat, protocol.Heartbeat{Version: "v0.0.0-replay", Interval: time.Second})
	}
	for range 3 {
		beat()
		time.Sleep(500 * time.Millisecond)
	}
	r.waitCluster(t, agent, "offline", func(rec protocol.ClusterRecord) bool { return rec.Agent != nil && rec.Agent.Offline })
	beat()
	r.waitCluster(t, agent, "back online", func(rec protocol.ClusterRecord) bool { return rec.Agent != nil && !rec.Agent.Offline })
	r.export(t, agent, "cluster", "agent-heartbeats-running")

	// A managed agent: installed through the kubeconfig, its settings
	// changed, then upgraded for new controller defaults.
	managed := protocol.ClusterID("edge-managed")
	r.applyCluster(t, "edge-managed", protocol.ClusterApply{Labels: map[string]string{"env": "staging"}, SetLabels: true,
		KubeconfigHash: fakeHash("kubeconfig edge-managed"), Context: "kind-edge-managed",
		Agent: &protocol.AgentApply{Managed: true, Config: &protocol.AgentConfig{Namespace: "cattle-fleet-system",
			Image: "flotilla-worker:v0.0.0-replay", TemporalAddress: "temporal.example.com:7233", TemporalNamespace: "default"}}})
	r.waitCluster(t, managed, "agent installed", func(rec protocol.ClusterRecord) bool { return rec.Agent.Deploys == 1 })
	r.applyCluster(t, "edge-managed", protocol.ClusterApply{Labels: map[string]string{"env": "staging"}, SetLabels: true,
		AgentSettings: &protocol.AgentSettings{Namespace: "flotilla-agent"}})
	r.waitCluster(t, managed, "agent moved", func(rec protocol.ClusterRecord) bool { return rec.Agent.Deploys == 2 })
	r.f.mu.Lock()
	r.f.agentDefaults = "fake-defaults-2"
	r.f.mu.Unlock()
	r.signal(t, managed, protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "fake-defaults-2"})
	r.waitCluster(t, managed, "agent upgraded", func(rec protocol.ClusterRecord) bool {
		return rec.Agent.Deploys == 3 && rec.Agent.DefaultsHash == "fake-defaults-2"
	})
	r.signal(t, managed, protocol.SignalHeartbeat, protocol.Heartbeat{Version: "v0.0.0-replay", Interval: time.Minute})
	r.waitCluster(t, managed, "heartbeat", func(rec protocol.ClusterRecord) bool { return rec.Agent.LastSeen != nil })
	r.export(t, managed, "cluster", "managed-agent-running")

	revoked := r.startToken(t, "fakerevoked00001", 24*time.Hour)
	r.signal(t, revoked, protocol.SignalDelete, nil)
	r.finish(t, revoked)
	r.export(t, revoked, "clustertoken", "revoked")
	expired := r.startToken(t, "fakeexpired00001", 2*time.Second)
	r.finish(t, expired)
	r.export(t, expired, "clustertoken", "expired")
	waiting := r.startToken(t, "fakewaiting00001", 24*time.Hour)
	r.export(t, waiting, "clustertoken", "waiting-running")
}

func (r *recorder) groups(t *testing.T) {
	t.Parallel()
	group := func(name string, labels map[string]string) api.ClusterGroup {
		return api.ClusterGroup{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindClusterGroup},
			Metadata: api.ObjectMeta{Name: name, Namespace: recordNamespace},
			Spec:     api.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	}
	id := r.applyGroup(t, group("prod-eu", map[string]string{"env": "prod", "region": "eu"}))
	r.applyGroup(t, group("prod-eu", map[string]string{"env": "prod"}))
	r.signal(t, id, protocol.SignalDelete, nil)
	r.finish(t, id)
	r.export(t, id, "clustergroup", "applied-changed-removed")
	id = r.applyGroup(t, group("canary", map[string]string{"tier": "canary"}))
	r.export(t, id, "clustergroup", "applied-running")
}

// recorder drives the scenarios and exports their histories.
type recorder struct {
	c      client.Client
	f      *fakes
	dir    string
	commit string
	logger *temporalx.Logger
}

func (r *recorder) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// applyRepo applies the GitRepo name as `flotilla apply` does; edit
// changes the spec from the scenario's default.
func (r *recorder) applyRepo(t *testing.T, name string, edit func(*api.GitRepoSpec)) string {
	gr := api.GitRepo{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindGitRepo},
		Metadata: api.ObjectMeta{Name: name, Namespace: recordNamespace}, Spec: fakeSpec(name)}
	if edit != nil {
		edit(&gr.Spec)
	}
	id := protocol.GitRepoID(recordNamespace, name)
	var res protocol.ApplyResult
	require.NoError(t, temporalx.UpdateWithStart(r.ctx(t), r.c, protocol.DefaultTaskQueue, id, protocol.UpdateApply,
		protocol.GitRepoApply{GitRepo: gr}, &res, protocol.GitRepoWorkflow, protocol.GitRepoStart{Namespace: recordNamespace, Name: name},
		temporalx.KeyGitRepo.ValueSet(recordNamespace+"/"+name), temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(gr.Spec.Repo))))
	return id
}

// fakeSpec is the GitRepo's spec; its targets are the default (the fakes
// decide the clusters).
func fakeSpec(name string) api.GitRepoSpec {
	return api.GitRepoSpec{Repo: "https://git.example.com/fleet/" + name + ".git", Branch: "main", Paths: []string{"apps"},
		PollingInterval: &metav1.Duration{Duration: pollEvery}}
}

// startRollout starts the rollout of the fake repository's commit as
// GitRepoWorkflow does.
func (r *recorder) startRollout(t *testing.T, name string, inv []workflows.InventoryEntry) string {
	commit := r.f.setCommit(name, 1)
	spec := fakeSpec(name)
	id := protocol.RolloutID(recordNamespace, name, commit, 1)
	_, err := r.c.ExecuteWorkflow(r.ctx(t), client.StartWorkflowOptions{ID: id, TaskQueue: protocol.DefaultTaskQueue,
		StaticSummary: "roll out " + recordNamespace + "/" + name + " at " + commit[:12],
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalx.KeyGitRepo.ValueSet(recordNamespace+"/"+name),
			temporalx.KeyCommit.ValueSet(commit),
			temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(spec.Repo)),
			temporalx.KeyState.ValueSet("Rolling"),
		)}, workflows.RolloutWorkflow, workflows.RolloutInput{GitRepo: activities.GitRepoRef{Namespace: recordNamespace, Name: name},
		Spec: spec, Commit: commit, Generation: 1, Inventory: inv})
	require.NoError(t, err)
	return id
}

// previousDeploys is the inventory of the commit before the fake
// repository's first: bundles on clusters.
func previousDeploys(repo string, bundles, clusters []string) []workflows.InventoryEntry {
	var inv []workflows.InventoryEntry
	for _, b := range bundles {
		fb := fakeBundle(repo, b, commitOf(repo, 0))
		for _, c := range clusters {
			inv = append(inv, workflows.InventoryEntry{Bundle: b, Cluster: c, Release: fb.Release, Namespace: fb.Namespace, DeploymentID: fb.DeploymentID})
		}
	}
	return inv
}

func (r *recorder) waitApproval(t *testing.T, id string) {
	r.eventually(t, id+" waits for approval", func() bool {
		var st status.Rollout
		if r.query(t, id, &st) != nil {
			return false
		}
		for _, w := range st.Waits {
			if w.Kind == status.WaitApproval {
				return true
			}
		}
		return false
	})
}

func (r *recorder) applyCluster(t *testing.T, name string, a protocol.ClusterApply) {
	_, err := temporalx.ApplyCluster(r.ctx(t), r.c, protocol.DefaultTaskQueue, name, a)
	require.NoError(t, err)
}

func (r *recorder) applyGroup(t *testing.T, g api.ClusterGroup) string {
	id := protocol.ClusterGroupID(g.Metadata.Name)
	var res protocol.GroupRecord
	require.NoError(t, temporalx.UpdateWithStart(r.ctx(t), r.c, protocol.DefaultTaskQueue, id, protocol.UpdateApply, g, &res,
		protocol.ClusterGroupWorkflow, protocol.GroupStart{Record: protocol.GroupRecord{Name: g.Metadata.Name}}))
	return id
}

// startToken creates a registration token as `flotilla cluster token
// create` does. Its verifier is of a fake proof (register presents it).
func (r *recorder) startToken(t *testing.T, tokenID string, ttl time.Duration) string {
	id := protocol.ClusterTokenID(tokenID)
	_, err := r.c.ExecuteWorkflow(r.ctx(t), client.StartWorkflowOptions{ID: id, TaskQueue: protocol.DefaultTaskQueue},
		protocol.ClusterTokenWorkflow, protocol.TokenStart{ID: tokenID, Verifier: cluster.Verifier(fakeProof(tokenID)), TTL: ttl})
	require.NoError(t, err)
	return id
}

func (r *recorder) register(tokenID, clusterName string) protocol.Register {
	return protocol.Register{Cluster: clusterName, Proof: fakeProof(tokenID), Labels: map[string]string{"env": "prod"}}
}

func fakeProof(tokenID string) string { return fakeHash("fake proof of token " + tokenID) }

func (r *recorder) signal(t *testing.T, id, name string, arg any) {
	require.NoError(t, r.c.SignalWorkflow(r.ctx(t), id, "", name, arg))
}

func (r *recorder) update(t *testing.T, id, name string, arg, out any) error {
	h, err := r.c.UpdateWorkflow(r.ctx(t), client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	return h.Get(r.ctx(t), out)
}

func (r *recorder) query(t *testing.T, id string, out any) error {
	v, err := r.c.QueryWorkflow(r.ctx(t), id, "", protocol.QueryStatus)
	if err != nil {
		return err
	}
	return v.Get(out)
}

// waitCommit waits until the GitRepo rolled commit out and is settled.
func (r *recorder) waitCommit(t *testing.T, id, commit string) {
	r.waitRepo(t, id, "rolled out "+commit, func(st status.GitRepo) bool { return st.Commit == commit && st.Settled })
}

func (r *recorder) waitRepo(t *testing.T, id, what string, ok func(status.GitRepo) bool) {
	r.eventually(t, id+": "+what, func() bool {
		var st status.GitRepo
		return r.query(t, id, &st) == nil && ok(st)
	})
}

func (r *recorder) waitCluster(t *testing.T, id, what string, ok func(protocol.ClusterRecord) bool) {
	r.eventually(t, id+": "+what, func() bool {
		var rec protocol.ClusterRecord
		return r.query(t, id, &rec) == nil && rec.Agent != nil && ok(rec)
	})
}

// waitCalls waits until the fake activity ran n times for key.
func (r *recorder) waitCalls(t *testing.T, activity, key string, n int) {
	r.eventually(t, fmt.Sprintf("%s %s called %d times", activity, key, n), func() bool { return r.f.callsOf(activity, key) >= n })
}

func (r *recorder) eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finish waits for the workflow to end, whatever its result.
func (r *recorder) finish(t *testing.T, id string) {
	err := r.c.GetWorkflow(r.ctx(t), id, "").Get(r.ctx(t), nil)
	require.NoError(t, err, "workflow %s", id)
}

// export writes the history of the workflow's latest run as
// <kind>-<commit>-<scenario>.json, once no workflow task is pending (a
// running workflow waits on a timer, signal or activity), and checks that
// the code that recorded it replays it.
func (r *recorder) export(t *testing.T, id, kind, scenario string) {
	var hist *historypb.History
	r.eventually(t, id+" at rest", func() bool {
		hist = &historypb.History{}
		it := r.c.GetWorkflowHistory(r.ctx(t), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			hist.Events = append(hist.Events, e)
		}
		return atRest(hist.Events)
	})
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	path := filepath.Join(r.dir, fmt.Sprintf("%s-%s-%s.json", kind, r.commit, scenario))
	replayer := worker.NewWorkflowReplayer()
	registerWorkflows(replayer)
	err = replayer.ReplayWorkflowHistoryWithOptions(r.logger, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id}}) // a rollout names its batches after its ID
	if err != nil {
		// Kept for a look, under a name the replay test does not read.
		_ = os.WriteFile(path+".unreplayable", data, 0o644)
		t.Fatalf("the code that recorded %s cannot replay it: %v", id, err)
	}
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	t.Logf("%s: %d events, %d KB", filepath.Base(path), len(hist.Events), len(data)/1024)
}

// atRest reports whether the last workflow task completed: nothing the
// workflow has been told is still waiting to be handled.
func atRest(events []*historypb.HistoryEvent) bool {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			return true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			return false
		}
	}
	return false
}

// fakes are the activities the recorded workflows call, under their real
// names (the method names), answering from the fake repositories.
type fakes struct {
	c             client.Client
	mu            sync.Mutex
	repos         map[string]*fakeRepo
	calls         map[string]int // by "<activity> <key>"
	agentDefaults string
}

// fakeRepo is one GitRepo's fake remote, bundles and clusters.
type fakeRepo struct {
	// commit is where the branch is; "" while it does not exist.
	commit     string
	clusters   []string
	bundles    []string
	strategies []activities.BundleStrategy
	// faults are how deploys of "bundle@cluster" go wrong.
	faults map[string]fault
	// invalid, when set, fails Render (a bad fleet.yaml).
	invalid string
}

type fault int

// Faults; the zero fault deploys and is Ready.
const (
	// errApplied: the cluster refuses the bundle's objects.
	errApplied fault = iota + 1
	// notReady: NotReady after the deploy, Ready once waited for.
	notReady
	// hangsNotReady: NotReady until the wait is canceled.
	hangsNotReady
	// unreachableOnce: the first deploy to the cluster cannot reach it.
	unreachableOnce
)

func (f *fakes) add(name string, repo *fakeRepo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[name] = repo
}

func (f *fakes) repo(name string) fakeRepo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.repos[name]
}

// setCommit moves the fake repository's branch to its n-th commit.
func (f *fakes) setCommit(name string, n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[name].commit = commitOf(name, n)
	return f.repos[name].commit
}

func (f *fakes) count(activity, key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[activity+" "+key]++
	return f.calls[activity+" "+key]
}

func (f *fakes) callsOf(activity, key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[activity+" "+key]
}

// commitOf is the n-th commit of the fake repository name.
func commitOf(name string, n int) string { return fakeHash(fmt.Sprintf("%s commit %d", name, n))[:40] }

func fakeHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func fakeBundle(repo, name, commit string) activities.Bundle {
	manifest, options := "s-"+fakeHash(repo + name + commit)[:16], fakeHash(repo + name)[:16]
	return activities.Bundle{Name: name, Path: "apps/" + name, ManifestID: manifest, OptionsHash: options,
		DeploymentID: manifest + ":" + options, Release: repo + "-" + name, Namespace: "default", Resources: 2,
		BundleKey: "b-" + fakeHash(repo + name + commit + "key")[:16]}
}

func everywhere() strategy.Plan {
	return strategy.Plan{MaxUnavailable: 1 << 30, FailureThreshold: -1, Partitions: []strategy.Partition{{Name: "all", MaxUnavailable: 1 << 30}}}
}

func (f *fakes) ResolveCommit(_ context.Context, in activities.ResolveInput) (activities.ResolveResult, error) {
	f.count("ResolveCommit", in.GitRepo.Name)
	repo := f.repo(in.GitRepo.Name)
	if repo.commit == "" {
		return activities.ResolveResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("GitRepo %s: branch %s not found in %s",
			in.GitRepo, in.Spec.Branch, in.Spec.Repo), activities.ErrTypeRefNotFound, nil)
	}
	return activities.ResolveResult{Ref: "refs/heads/" + in.Spec.Branch, Commit: repo.commit}, nil
}

// CheckPolicy: the recorded namespaces have no restrictions or policies.
func (f *fakes) CheckPolicy(_ context.Context, in activities.CheckPolicyInput) (policy.Decision, error) {
	if in.HelmOp != nil {
		return policy.Set{}.HelmOp(*in.HelmOp), nil
	}
	return policy.Set{}.GitRepo(*in.Spec), nil
}

func (f *fakes) Render(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
	f.count("Render", in.GitRepo.Name)
	repo := f.repo(in.GitRepo.Name)
	if repo.invalid != "" {
		return activities.RenderResult{}, temporal.NewNonRetryableApplicationError("GitRepo "+in.GitRepo.String()+": "+repo.invalid,
			activities.ErrTypeInvalidBundle, nil)
	}
	var out activities.RenderResult
	for _, b := range repo.bundles {
		out.Bundles = append(out.Bundles, fakeBundle(in.GitRepo.Name, b, in.Commit))
	}
	return out, nil
}

func (f *fakes) TargetBundles(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
	repo := f.repo(in.GitRepo.Name)
	out := activities.TargetsResult{Registered: repo.clusters, Strategies: repo.strategies}
	for _, c := range repo.clusters {
		out.Matched = append(out.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
	}
	return out, nil
}

func (f *fakes) NotifyGitRepos(_ context.Context, in activities.NotifyInput) error {
	f.count("NotifyGitRepos", in.WaitFor)
	return nil
}

// RegisterAgent applies the registration to the cluster's workflow, as the
// real activity does.
func (f *fakes) RegisterAgent(ctx context.Context, in activities.RegisterAgentInput) (protocol.ClusterRecord, error) {
	rec, err := temporalx.ApplyCluster(ctx, f.c, activity.GetInfo(ctx).TaskQueue, in.Cluster, protocol.ClusterApply{
		Labels: in.Labels, SetLabels: len(in.Labels) > 0, Agent: &protocol.AgentApply{TokenID: in.TokenID}})
	var rejected *temporal.ApplicationError
	if errors.As(err, &rejected) {
		return protocol.ClusterRecord{}, temporal.NewNonRetryableApplicationError(rejected.Message(), activities.ErrTypeRegistrationRejected, nil)
	}
	return rec, err
}

func (f *fakes) Deploy(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
	attempt := f.count("Deploy", in.WorkflowID+" "+in.Cluster)
	repo := f.repo(in.GitRepo.Name)
	var out activities.DeployResult
	for _, b := range in.Bundles {
		d := deployed(in.Cluster, b)
		switch repo.faults[b.Name+"@"+in.Cluster] {
		case unreachableOnce:
			if attempt == 1 {
				return activities.DeployResult{Retry: true, Message: fmt.Sprintf(
					`cluster %s: Get "https://127.0.0.1:6443/version": dial tcp 127.0.0.1:6443: connect: connection refused`, in.Cluster)}, nil
			}
		case errApplied:
			d.State, d.AppliedDeploymentID, d.ReadyResources = status.ErrApplied, "", 0
			d.Message = fmt.Sprintf(`cluster %s: bundle %s: invalid release: ConfigMap "web" is invalid: metadata.labels: Invalid value: "-"`, in.Cluster, b.Name)
		case notReady, hangsNotReady:
			d.State, d.ReadyResources, d.NotReadyResources = status.NotReady, 1, 1
			d.Message = fmt.Sprintf("cluster %s: Deployment %s/%s: 0/1 replicas ready", in.Cluster, b.Namespace, b.Name)
		}
		out.Deployments = append(out.Deployments, d)
	}
	return out, nil
}

func (f *fakes) WaitReady(ctx context.Context, in activities.WaitReadyInput) (activities.DeployResult, error) {
	f.count("WaitReady", in.GitRepo.Name)
	repo := f.repo(in.GitRepo.Name)
	var out activities.DeployResult
	for _, b := range in.Bundles {
		if repo.faults[b.Name+"@"+in.Cluster] == hangsNotReady {
			for ctx.Err() == nil { // until the rollout cancels the wait
				activity.RecordHeartbeat(ctx, b.Name)
				time.Sleep(200 * time.Millisecond)
			}
			return out, ctx.Err()
		}
		out.Deployments = append(out.Deployments, deployed(in.Cluster, b))
	}
	return out, nil
}

func deployed(cluster string, b activities.Bundle) status.Deployment {
	return status.Deployment{Bundle: b.Name, Cluster: cluster, Release: b.Release, Namespace: b.Namespace, DeploymentID: b.DeploymentID,
		AppliedDeploymentID: b.DeploymentID, State: status.Ready, Resources: b.Resources, ReadyResources: b.Resources}
}

func (f *fakes) Cleanup(_ context.Context, in activities.CleanupInput) (activities.CleanupResult, error) {
	var out activities.CleanupResult
	for _, rel := range in.Releases {
		out.Removed = append(out.Removed, rel.Namespace+"/"+rel.Release)
	}
	return out, nil
}

func (f *fakes) Rollback(_ context.Context, in activities.RollbackInput) (activities.DeployResult, error) {
	var out activities.DeployResult
	for _, rel := range in.Releases {
		out.Deployments = append(out.Deployments, status.Deployment{Bundle: rel.Bundle, Cluster: in.Cluster, Release: rel.Release,
			Namespace: rel.Namespace, DeploymentID: rel.From, AppliedDeploymentID: rel.To, State: status.OutOfSync,
			Message: fmt.Sprintf("rolled back to %s on cluster %s: rollout halted", rel.To, in.Cluster)})
	}
	return out, nil
}

func (f *fakes) EnsureAgent(_ context.Context, in activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
	n := f.count("EnsureAgent", in.Cluster)
	f.mu.Lock()
	defer f.mu.Unlock()
	return activities.EnsureAgentResult{DeploymentID: fmt.Sprintf("agent-%s-%d", in.Cluster, n), DefaultsHash: f.agentDefaults,
		Deployed: true, Revision: n}, nil
}
