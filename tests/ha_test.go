package tests

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/history"
)

// haFleet is the production topology: Temporal on PostgreSQL in a process
// of its own, two controller replicas (separate processes with separate,
// empty state dirs and the same seal keys), an agent for a pull-mode
// cluster, an OCI registry for the agent's content, and a CLI that runs in
// an empty directory of its own.
type haFleet struct {
	*agentFleet
	server *testenv.TemporalServer
	keys   string
	// replicas are the running controller processes; starts counts every
	// start of each.
	replicas [2]*testenv.Process
	starts   [2]int
	// secrets are the plaintext values that must never reach a history.
	secrets map[string]string
}

const haPassword = "ha-Git-Pa55word-41c7"

func startHAFleet(t testing.TB) *haFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL, Temporal, kube-apiservers, a registry and a Git server")
	}
	pg := testenv.StartPostgres(t)
	server := testenv.StartTemporalServer(t, testenv.TemporalServerOptions{Binary: bins.temporal, Postgres: pg})
	f := &haFleet{server: server, secrets: map[string]string{"git password": haPassword}}
	f.agentFleet = &agentFleet{t: t, addr: server.FrontendAddress(), cliDir: t.TempDir(), agents: map[string]*agentProc{}}
	f.clusters = testenv.StartClusters(t, 2, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := temporalx.ClientOptions{Address: server.FrontendAddress()}.Dial(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	f.c = c
	reg := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	f.registry = "oci://" + strings.TrimPrefix(reg.URL, "http://") + "/flotilla/content"
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{Username: "bot", Password: haPassword})
	f.defaults = writeTemp(t, "agent-defaults.yaml", "heartbeatInterval: 1s\nimage: flotilla-worker:e2e\n")

	f.keys = filepath.Join(t.TempDir(), "seal-keys")
	out, err := exec.Command(bins.worker, "keygen", "--out", f.keys).CombinedOutput()
	require.NoError(t, err, "%s", out)
	keyID := strings.TrimSpace(string(out))
	key, err := os.ReadFile(filepath.Join(f.keys, keyID))
	require.NoError(t, err)
	f.secrets["sealing private key"] = strings.TrimSpace(string(key))

	for i := range f.replicas {
		f.startReplica(t, i)
	}
	return f
}

// startReplica starts controller replica i on a new, empty state dir.
func (f *haFleet) startReplica(t testing.TB, i int) {
	t.Helper()
	f.starts[i]++
	args := append([]string{"--temporal-address", f.frontend(), "--state-dir", f.t.TempDir(), "--seal-keys", f.keys,
		"--agent-defaults", f.defaults, "--webhook-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, f.registryArgs()...)
	p := testenv.StartProcess(f.t, testenv.ProcessOptions{Name: fmt.Sprintf("flotilla-controller-%d-%d", i, f.starts[i]), Path: bins.worker, Args: args})
	f.replicas[i], f.ctrl = p, p
	f.logs = append(f.logs, p.LogPath())
	f.ctrlLogs = append(f.ctrlLogs, p.LogPath())
	waitLog(t, p, `"msg":"Worker started"`, time.Minute)
}

// killReplica kills replica i with SIGKILL and returns when it is dead,
// with its PID (the prefix of its Temporal worker identity).
func (f *haFleet) killReplica(t testing.TB, i int) int {
	t.Helper()
	pid := f.replicas[i].PID()
	kill9(t, f.replicas[i])
	f.kills++
	f.ctrl = f.replicas[1-i]
	return pid
}

// register does, with the CLI only, what a user does from a laptop: a Git
// credential Secret, a push-mode cluster (cluster-1) and a registration
// token for the agent of a pull-mode cluster (cluster-2).
func (f *haFleet) register(t testing.TB) {
	t.Helper()
	require.Contains(t, f.cli(t, "apply", "-f", writeTemp(t, "creds.yaml",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-creds\n  namespace: fleet-default\ntype: kubernetes.io/basic-auth\n"+
			"stringData:\n  username: bot\n  password: "+haPassword+"\n")), "secret/fleet-default/git-creds created")
	c1 := f.cluster("cluster-1")
	require.Contains(t, f.cli(t, "cluster", "add", "cluster-1", "--kubeconfig", c1.KubeconfigPath, "--label", "env=ha", "--label", "mode=push"),
		"cluster/cluster-1 created")
	cfg, err := clientcmd.LoadFromFile(c1.KubeconfigPath)
	require.NoError(t, err)
	for name, auth := range cfg.AuthInfos {
		if auth.Token != "" {
			f.secrets["cluster-1 token of "+name] = auth.Token
		}
		if len(auth.ClientKeyData) > 0 {
			f.secrets["cluster-1 client key of "+name] = string(auth.ClientKeyData)
		}
	}
	token := f.newToken(t, "1h")
	f.secrets["registration token"] = token
	f.startAgent(t, "cluster-2", token, "--label", "env=ha", "--label", "mode=pull")
	entries, err := os.ReadDir(f.cliDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the CLI writes nothing on its host")
}

// haReport is what runHA measured.
type haReport struct {
	Rollouts, Lost, Kills      int
	Duplicates, ExtraRevisions int
	Plaintext                  []string
	FailoverMs, DeployMs       []float64
	Histories                  int
}

// runHA rolls 10 commits out to both clusters while killing one replica
// at a random point of each of 8 rollouts (the killed one comes back with
// an empty state dir), restarting the Temporal server in the middle of
// another, then audits logs, Helm records and every history.
func runHA(t testing.TB, f *haFleet, seed uint64) haReport {
	t.Helper()
	const ns, name = "ha-ns", "ha"
	clusters := []string{"cluster-1", "cluster-2"}
	var rep haReport
	repo := f.git.CreateRepo(t, "ha", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(name, "v0")})
	f.cli(t, "apply", "-f", writeTemp(t, "ha.yaml", gitRepoDoc(name, repo.URL(), selectorTarget("env", "ha")+"  clientSecretName: git-creds\n")))
	f.waitGitRepo(t, name, "the first commit on both clusters", 3*time.Minute, settledAt(repo.Head(t), 2))

	t.Logf("ha: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	type kill struct {
		at     time.Time
		pid    int
		commit string
	}
	var kills []kill
	for i := 1; i <= 10; i++ {
		value := fmt.Sprintf("v%d", i)
		commit := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(name, value)}, value)
		start := time.Now()
		f.cli(t, "sync", name)
		victim := -1
		switch i {
		case 5:
			// The Temporal server goes away mid-rollout and comes back.
			time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
			f.server.Stop()
			time.Sleep(time.Second)
			f.server.Start()
		case 1:
			// A quiet rollout: what a deploy costs without failures.
		default:
			victim = i % 2
			delay := time.Duration(rng.IntN(2000)) * time.Millisecond
			if i == 2 {
				// One kill lands right after the sync, before the rollout
				// can finish, so failover is always measured; the others
				// fall at random points (and may miss a fast rollout).
				delay = 0
			}
			time.Sleep(delay)
			kills = append(kills, kill{at: time.Now(), pid: f.killReplica(t, victim), commit: commit})
		}
		ok := f.waitGitRepoErr(name, 4*time.Minute, settledAt(commit, 2))
		if ok {
			rep.Rollouts++
			if i == 1 {
				rep.DeployMs = append(rep.DeployMs, float64(time.Since(start).Milliseconds()))
			}
		} else {
			rep.Lost++
			t.Errorf("ha: rollout %s (commit %s) did not complete", value, commit)
		}
		if victim >= 0 {
			f.startReplica(t, victim)
		}
	}
	rep.Kills = len(kills)
	a := f.audit(t, name, ns, clusters)
	rep.Duplicates, rep.ExtraRevisions = a.duplicates(), a.extraRevisions()
	if rep.Duplicates != 0 || rep.ExtraRevisions != 0 {
		for _, c := range clusters {
			t.Logf("ha: Helm records on %s: %v", c, helmRecordIDs(t, f.cluster(c), ns, name))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, k := range kills {
		if ms, ok := failover(ctx, t, f.c, protocol.RolloutID(api.DefaultNamespace, name, k.commit, 0), k.at, k.pid); ok {
			rep.FailoverMs = append(rep.FailoverMs, ms)
		}
	}
	rep.Histories, rep.Plaintext = auditHistories(ctx, t, f.c, f.secrets)
	for _, p := range f.logs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for what, s := range f.secrets {
			if strings.Contains(string(b), s) {
				rep.Plaintext = append(rep.Plaintext, what+" in log "+filepath.Base(p))
			}
		}
	}
	return rep
}

// waitGitRepoErr is waitGitRepo that reports a timeout instead of failing.
func (f *agentFleet) waitGitRepoErr(name string, timeout time.Duration, cond func(status.GitRepo) bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if st, err := f.gitRepoStatus(name); err == nil && cond(st) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// failover measures, for a replica killed at `at` during the rollout whose
// ID starts with rolloutPrefix (generation aside), how long until an
// activity of that rollout (or its batch children) completed on another
// worker. ok is false when nothing of the rollout completed after the kill.
func failover(ctx context.Context, t testing.TB, c client.Client, rolloutID string, at time.Time, killedPID int) (float64, bool) {
	t.Helper()
	// The generation suffix is not known here: match the commit's prefix.
	prefix := rolloutID[:strings.LastIndex(rolloutID, "-")]
	killed := strconv.Itoa(killedPID) + "@"
	best := time.Duration(-1)
	err := temporalx.EachExecution(ctx, c, fmt.Sprintf("WorkflowId STARTS_WITH '%s'", prefix), func(e *commonpb.WorkflowExecution) error {
		it := c.GetWorkflowHistory(ctx, e.GetWorkflowId(), e.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		started := map[int64]string{} // scheduled event ID -> identity
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
				started[a.GetScheduledEventId()] = a.GetIdentity()
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				when := ev.GetEventTime().AsTime()
				id := started[a.GetScheduledEventId()]
				if when.After(at) && !strings.HasPrefix(id, killed) {
					if d := when.Sub(at); best < 0 || d < best {
						best = d
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return float64(best.Milliseconds()), best >= 0
}

// auditHistories decodes every payload of every run's history and
// reports each secret found in plaintext (by its description).
func auditHistories(ctx context.Context, t testing.TB, c client.Client, secrets map[string]string) (int, []string) {
	t.Helper()
	var found []string
	n := 0
	require.NoError(t, temporalx.EachExecution(ctx, c, "", func(e *commonpb.WorkflowExecution) error {
		text, err := history.RunText(ctx, c, e.GetWorkflowId(), e.GetRunId())
		if err != nil {
			return err
		}
		n++
		for what, s := range secrets {
			for _, form := range secretForms(s) {
				if strings.Contains(text, form) {
					found = append(found, what+" in "+e.GetWorkflowId())
					break
				}
			}
		}
		return nil
	}))
	sort.Strings(found)
	return n, found
}

// secretForms are the ways s can show in a decoded history: as it is, and
// base64-encoded inside a []byte field at any of the three alignments (the
// characters that depend on the neighbouring bytes are cut off).
func secretForms(s string) []string {
	forms := []string{s}
	for pad := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, pad), s...))
		// Skip the characters that encode the padding and the last,
		// partial group.
		from, to := (pad*8+5)/6, len(enc)-4
		if to-from >= 8 {
			forms = append(forms, enc[from:to])
		}
	}
	return forms
}

// TestHA: two controller replicas on Temporal with PostgreSQL lose
// nothing when either is killed at any moment or the Temporal server
// restarts mid-rollout, and no secret reaches a history in plaintext.
func TestHA(t *testing.T) {
	f := startHAFleet(t)
	f.register(t)
	rep := runHA(t, f, uint64(time.Now().UnixNano()))
	t.Logf("ha: %d rollouts, %d kills, failover %v ms, %d histories audited", rep.Rollouts, rep.Kills, rep.FailoverMs, rep.Histories)
	assert.Equal(t, 10, rep.Rollouts)
	assert.Zero(t, rep.Lost)
	assert.Equal(t, 8, rep.Kills)
	assert.Zero(t, rep.Duplicates, "duplicate Deployed bundle lines")
	assert.Zero(t, rep.ExtraRevisions, "Helm revisions beyond distinct deployment IDs")
	assert.Empty(t, rep.Plaintext, "secrets in plaintext")
	assert.Greater(t, rep.Histories, 14, "GitRepo, rollout, cluster, Secret and key histories")
	assert.NotEmpty(t, rep.FailoverMs, "at least one kill hit a rollout in flight")
}

// The audit finds a secret inside a []byte field whatever bytes surround
// it, and does not find it where it is absent.
func TestSecretForms(t *testing.T) {
	secret := "s3cret-Pa55word-9f2c"
	for pre := range 4 {
		data := append([]byte(strings.Repeat("k", pre)), secret+"-and-more"...)
		enc := base64.StdEncoding.EncodeToString(data)
		hit := false
		for _, f := range secretForms(secret) {
			hit = hit || strings.Contains(enc, f)
		}
		assert.True(t, hit, "prefix of %d bytes", pre)
	}
	other := base64.StdEncoding.EncodeToString([]byte("kk" + "s3cret-Pa55w0rd-9f2c"))
	for _, f := range secretForms(secret) {
		assert.NotContains(t, other, f)
	}
}
