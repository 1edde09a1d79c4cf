package tests

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// sshHookSecret is TestGitSSH's global GitHub webhook secret.
const sshHookSecret = "gh-ssh-2b7e91c4"

// TestGitSSH deploys GitRepos whose repo is an ssh:// URL served by
// Debian's sshd through git-shell, with deploy keys in kubernetes.io/ssh-auth
// Secrets applied with `flotilla apply`: one worker (with a worker-wide
// --ssh-known-hosts file), one cluster and one sshd are shared by the
// subtests, which run in order.
func TestGitSSH(t *testing.T) {
	start := time.Now()
	sshd := testenv.StartSSHGitServer(t)
	workerKnownHosts := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(workerKnownHosts, []byte(sshd.KnownHostsLine()+"\n"), 0o600))
	f := startWebhookFleet(t, 1,
		"--ssh-known-hosts", workerKnownHosts,
		"--webhook-secrets", writeWebhookSecrets(t, map[string]string{"github": sshHookSecret}))
	key, pub := testenv.NewSSHKey(t)
	sshd.Authorize(t, pub)
	s := &sshScenario{f: f, sshd: sshd, key: key}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"DeployKeyDeploys", s.deployKeyDeploys},
		{"PollPicksUpCommit", s.pollPicksUpCommit},
		{"WebhookDeploys", s.webhookDeploys},
		{"UnknownHostKeyRefused", s.unknownHostKeyRefused},
		{"InsecureSkipHostKeyChecksWarns", s.insecureWarns},
		{"WorkerKnownHostsFile", s.workerKnownHosts},
		{"ChangedHostKeyRefused", s.changedHostKeyRefused},
		{"SCPLikeURLDeploys", s.scpLikeDeploys},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.run) {
			t.Fatalf("%s failed; later scenarios depend on it", st.name)
		}
	}
	t.Logf("TestGitSSH took %s", time.Since(start).Round(time.Millisecond))
}

type sshScenario struct {
	f    *fleet
	sshd *testenv.SSHGitServer
	key  []byte
	// repo is served over SSH (and HTTP, unused); polled follows it by
	// polling, hooked only by webhooks.
	repo *testenv.GitRepo
}

// sshSecret is a kubernetes.io/ssh-auth Secret with the deploy key and,
// when knownHosts is not empty, a known_hosts.
func (s *sshScenario) sshSecret(name, knownHosts string) string {
	doc := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\ntype: kubernetes.io/ssh-auth\ndata:\n" +
		"  ssh-privatekey: " + base64.StdEncoding.EncodeToString(s.key) + "\n"
	if knownHosts != "" {
		doc += "  known_hosts: " + base64.StdEncoding.EncodeToString([]byte(knownHosts+"\n")) + "\n"
	}
	return doc
}

// sshGitRepo is a GitRepo following repo over SSH in namespace ns.
func (s *sshScenario) sshGitRepo(name, secret, extra string) string {
	return gitRepoDoc(name, s.sshd.RepoURL(s.repo.Dir()), "  clientSecretName: "+secret+"\n"+extra+allClusters)
}

func (s *sshScenario) cmValue(t *testing.T, ns, name string) string {
	cm, ok := s.f.configMap(t, s.f.clusters[0].Name, ns, name)
	if !ok {
		return ""
	}
	return cm.Data["value"]
}

// 1. repo ssh://…, the Secret's known_hosts has the [127.0.0.1]:PORT line:
// the first commit deploys.
func (s *sshScenario) deployKeyDeploys(t *testing.T) {
	f := s.f
	s.repo = f.git.CreateRepo(t, "ssh-app", map[string]string{
		"polled/fleet.yaml": fleetYAML("ssh-polled"), "polled/cm.yaml": configMapDoc("ssh-cm", "v1"),
		"hooked/fleet.yaml": fleetYAML("ssh-hooked"), "hooked/cm.yaml": configMapDoc("ssh-cm", "v1"),
		"insecure/fleet.yaml": fleetYAML("ssh-insecure"), "insecure/cm.yaml": configMapDoc("ssh-cm", "v1"),
		"worker/fleet.yaml": fleetYAML("ssh-worker"), "worker/cm.yaml": configMapDoc("ssh-cm", "v1"),
		"changed/fleet.yaml": fleetYAML("ssh-changed"), "changed/cm.yaml": configMapDoc("ssh-cm", "v1"),
		"scp/fleet.yaml": fleetYAML("ssh-scp"), "scp/cm.yaml": configMapDoc("ssh-cm", "v1"),
	})
	out := f.apply(t, s.sshSecret("deploy-key", s.sshd.KnownHostsLine())+"---\n"+
		s.sshGitRepo("ssh-polled", "deploy-key", "  paths: [polled]\n  pollingInterval: 1s\n")+"---\n"+
		s.sshGitRepo("ssh-hooked", "deploy-key", "  paths: [hooked]\n  disablePolling: true\n"))
	require.Contains(t, out, "gitrepo/fleet-default/ssh-polled created")
	head := s.repo.Head(t)
	f.waitFor(t, "ssh-polled", "first commit Ready", settledAt(head, 1))
	st := f.waitFor(t, "ssh-hooked", "first commit Ready", settledAt(head, 1))
	assert.Empty(t, st.Warnings, "host key checked: no warning")
	assert.Equal(t, "v1", s.cmValue(t, "ssh-polled", "ssh-cm"))
	assert.Equal(t, "v1", s.cmValue(t, "ssh-hooked", "ssh-cm"))
}

// 2. A new commit is fetched over SSH by polling.
func (s *sshScenario) pollPicksUpCommit(t *testing.T) {
	next := s.repo.Commit(t, map[string]string{"polled/cm.yaml": configMapDoc("ssh-cm", "v2")}, "polled v2")
	s.f.waitFor(t, "ssh-polled", "polled commit Ready", settledAt(next, 1))
	assert.Equal(t, "v2", s.cmValue(t, "ssh-polled", "ssh-cm"))
}

// 3. A GitHub push naming the repository by its ssh_url (and an https
// clone_url of the same path) deploys the GitRepo that does not poll.
func (s *sshScenario) webhookDeploys(t *testing.T) {
	f := s.f
	before := f.status(t, "ssh-hooked").Commit
	next := s.repo.Commit(t, map[string]string{"hooked/cm.yaml": configMapDoc("ssh-cm", "v3")}, "hooked v3")
	body := sshGitHubPush(s.sshd.RepoURL(s.repo.Dir()), before, next)
	resp := newHookClient(t, f).post(t, "/", githubHeaders(newDeliveryID(), signGitHub(sshHookSecret, body)), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r := resp.decode(t)
	assert.Contains(t, r.Signalled, hookSignalled{GitRepo: "fleet-default/ssh-hooked", Ref: "refs/heads/master", Commit: next})
	f.waitFor(t, "ssh-hooked", "webhook commit Ready", settledAt(next, 1))
	assert.Equal(t, "v3", s.cmValue(t, "ssh-hooked", "ssh-cm"))
}

// 4. A Secret whose known_hosts lacks the host: refused, naming the host
// and the offered key's fingerprint; nothing deploys.
func (s *sshScenario) unknownHostKeyRefused(t *testing.T) {
	f := s.f
	other := "[127.0.0.1]:1 " + strings.SplitN(s.sshd.KnownHostsLine(), " ", 2)[1]
	f.apply(t, s.sshSecret("wrong-hosts", other)+"---\n"+
		s.sshGitRepo("ssh-unknown", "wrong-hosts", "  paths: [worker]\n"))
	host := "[127.0.0.1]:" + strconv.Itoa(s.sshd.Port())
	st := f.waitFor(t, "ssh-unknown", "host key refused", func(st status.GitRepo) bool { return strings.Contains(st.Error, "host key of") })
	assert.Contains(t, st.Error, "host key of "+host+" (ssh-ed25519 "+s.sshd.HostKeyFingerprint()+") is not in known_hosts")
	assert.Empty(t, st.Commit, "nothing deployed")
	assert.Empty(t, st.Deployments)
}

// 5. insecureSkipHostKeyChecks with a Secret without known_hosts (and a
// worker file that would match anyway): deploys, and status warns.
func (s *sshScenario) insecureWarns(t *testing.T) {
	f := s.f
	f.apply(t, s.sshSecret("no-hosts", "")+"---\n"+
		s.sshGitRepo("ssh-insecure", "no-hosts", "  paths: [insecure]\n  insecureSkipHostKeyChecks: true\n"))
	head := s.repo.Head(t)
	st := f.waitFor(t, "ssh-insecure", "deployed without host key check", settledAt(head, 1))
	require.NotEmpty(t, st.Warnings)
	assert.Contains(t, strings.Join(st.Warnings, "\n"), "is not checked (insecureSkipHostKeyChecks)")
}

// 6. A Secret without known_hosts: the worker's --ssh-known-hosts file
// checks the host key.
func (s *sshScenario) workerKnownHosts(t *testing.T) {
	f := s.f
	f.apply(t, s.sshGitRepo("ssh-worker-hosts", "no-hosts", "  paths: [worker]\n"))
	st := f.waitFor(t, "ssh-worker-hosts", "deployed, host key checked by the worker's file", settledAt(s.repo.Head(t), 1))
	assert.Empty(t, st.Warnings)
}

// 7. A GitRepo that deployed, whose Secret's known_hosts then names the
// host with another key (as after a man-in-the-middle or a replaced host
// key): `flotilla sync` is refused, naming the host, the offered key and the
// known one, and the commit pushed meanwhile is not fetched or deployed;
// with the right known_hosts back, the next sync deploys it.
func (s *sshScenario) changedHostKeyRefused(t *testing.T) {
	f := s.f
	const name = "ssh-changed"
	f.apply(t, s.sshSecret("changed-hosts", s.sshd.KnownHostsLine())+"---\n"+
		s.sshGitRepo(name, "changed-hosts", "  paths: [changed]\n  disablePolling: true\n"))
	deployed := s.repo.Head(t)
	f.waitFor(t, name, "deployed with the right host key", settledAt(deployed, 1))

	_, otherKey := testenv.NewSSHKey(t)
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(otherKey))
	require.NoError(t, err)
	host := "[127.0.0.1]:" + strconv.Itoa(s.sshd.Port())
	f.apply(t, s.sshSecret("changed-hosts", host+" "+otherKey))
	next := s.repo.Commit(t, map[string]string{"changed/cm.yaml": configMapDoc("ssh-cm", "v2")}, "changed v2")
	f.cli(t, "sync", name)
	st := f.waitFor(t, name, "sync refused or deployed", func(st status.GitRepo) bool {
		return st.Error != "" || st.Commit == next
	})
	assert.Contains(t, st.Error, "host key of "+host+" changed: the server offers "+s.sshd.HostKeyFingerprint()+
		", known_hosts has "+ssh.FingerprintSHA256(pub)+" for it")
	assert.Equal(t, deployed, st.Commit, "nothing new deployed")
	assert.Equal(t, deployed, st.LatestCommit, "the remote was not read")
	assert.Equal(t, "v1", s.cmValue(t, name, "ssh-cm"))

	f.apply(t, s.sshSecret("changed-hosts", s.sshd.KnownHostsLine()))
	f.cli(t, "sync", name)
	f.waitFor(t, name, "the next sync deploys", settledAt(next, 1))
	assert.Equal(t, "v2", s.cmValue(t, name, "ssh-cm"))
}

// 8. An scp-like repo, USER@127.0.0.1:PORT:/DIR (go-git's scp-like form
// with a port; git's own has none): fetched over SSH from that port, its
// host key checked against the [127.0.0.1]:PORT line.
func (s *sshScenario) scpLikeDeploys(t *testing.T) {
	f := s.f
	url := fmt.Sprintf("%s@127.0.0.1:%d:%s", s.sshd.User(), s.sshd.Port(), filepath.ToSlash(s.repo.Dir()))
	f.apply(t, gitRepoDoc("ssh-scp", url, "  clientSecretName: deploy-key\n  paths: [scp]\n  disablePolling: true\n"+allClusters))
	st := f.waitFor(t, "ssh-scp", "deployed from the scp-like URL", settledAt(s.repo.Head(t), 1))
	assert.Empty(t, st.Warnings, "host key checked: no warning")
	assert.Equal(t, "v1", s.cmValue(t, "ssh-scp", "ssh-cm"))
}

// sshGitHubPush is a GitHub push payload for the repository at sshURL:
// ssh_url as given, clone_url the https spelling of the same path.
func sshGitHubPush(sshURL, before, after string) []byte {
	path := sshURL[strings.Index(sshURL[len("ssh://"):], "/")+len("ssh://"):]
	name := strings.TrimSuffix(filepath.Base(path), ".git")
	b, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/master", "before": before, "after": after, "created": false, "deleted": false, "forced": false,
		"repository": map[string]any{
			"name": name, "full_name": "flotilla/" + name, "default_branch": "master",
			"clone_url": "https://127.0.0.1" + path, "ssh_url": sshURL,
		},
		"pusher":  map[string]any{"name": "e2e"},
		"commits": []any{map[string]any{"id": after, "message": "e2e"}},
	})
	return b
}
