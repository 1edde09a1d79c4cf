package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// signingClone is a git CLI clone of a test Git server's repository with
// signing keys: an OpenPGP key in its own GNUPGHOME and SSH keys made by
// ssh-keygen, as a developer signs with `git commit -S`.
type signingClone struct {
	dir, remote string
	env         []string
	// pgp is the OpenPGP key's fingerprint; pgpPublic its armored export.
	pgp, pgpPublic string
	// sshKey, sshOther: private key files; sshPublic is sshKey's public
	// line (sshOther is not trusted).
	sshKey, sshOther, sshPublic string
}

func newSigningClone(t *testing.T, repo *testenv.GitRepo) *signingClone {
	t.Helper()
	for _, tool := range []string{"git", "gpg", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	home := t.TempDir()
	gnupg := filepath.Join(home, "gnupg")
	require.NoError(t, os.Mkdir(gnupg, 0o700))
	c := &signingClone{dir: filepath.Join(home, "work"), remote: repo.Dir(),
		env: append(os.Environ(), "HOME="+home, "GNUPGHOME="+gnupg, "GIT_CONFIG_NOSYSTEM=1")}
	t.Cleanup(func() { _, _ = c.run("gpgconf", "--kill", "gpg-agent") }) // the agent gpg started for this home

	c.must(t, "gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Alice Signer <alice@example.com>", "ed25519", "sign", "never")
	for _, line := range strings.Split(c.must(t, "gpg", "--batch", "--with-colons", "--list-secret-keys"), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && c.pgp == "" {
			c.pgp = f[9]
		}
	}
	require.NotEmpty(t, c.pgp)
	c.pgpPublic = c.must(t, "gpg", "--batch", "--armor", "--export", c.pgp)
	c.sshKey, c.sshOther = filepath.Join(home, "id_bob"), filepath.Join(home, "id_eve")
	c.must(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob@laptop", "-f", c.sshKey)
	c.must(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "eve@elsewhere", "-f", c.sshOther)
	pub, err := os.ReadFile(c.sshKey + ".pub")
	require.NoError(t, err)
	c.sshPublic = string(pub)

	c.must(t, "git", "clone", "-q", c.remote, c.dir)
	return c
}

func (c *signingClone) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	if _, err := os.Stat(c.dir); err != nil {
		cmd.Dir = ""
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

func (c *signingClone) must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := c.run(name, args...)
	require.NoError(t, err)
	return out
}

// git runs git in the clone with an identity set.
func (c *signingClone) git(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(c.must(t, "git", append([]string{"-c", "user.name=Dev", "-c", "user.email=dev@example.com"}, args...)...))
}

// Ways commit signs (git -c options).
func (c *signingClone) withGPG() []string {
	return []string{"-c", "gpg.format=openpgp", "-c", "user.signingkey=" + c.pgp}
}

func sshSigning(key string) []string {
	return []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + key}
}

// commit writes file with content, commits it (signed with the git
// options sign gives, or not when nil), pushes to master and returns the
// commit's hash.
func (c *signingClone) commit(t *testing.T, file, content string, sign []string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(c.dir, file)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, file), []byte(content), 0o644))
	c.git(t, "add", file)
	args := append(append([]string{}, sign...), "commit", "-q", "-m", "change "+file)
	if sign != nil {
		args = append(args, "-S")
	}
	c.git(t, args...)
	c.git(t, "push", "-q", "origin", "HEAD:refs/heads/master")
	return c.git(t, "rev-parse", "HEAD")
}

// TestVerify: spec.verify end to end, on one fleet: commits signed with
// gpg and with ssh-keygen by git itself are deployed and the signer named;
// an unsigned commit, and one signed by a key not in the Secret, are not
// deployed, the status names the commit, the key and why, and the earlier
// commit stays deployed; Tag mode deploys a gpg-signed annotated tag and
// an ssh-signed one, and refuses a lightweight one; TagAndHEAD refuses a
// signed tag on an unsigned commit, naming the commit, and deploys a signed
// tag on a signed commit.
func TestVerify(t *testing.T) {
	start := time.Now()
	f := startFleet(t, 1, 1)
	repo := f.git.CreateRepo(t, "signed", map[string]string{
		"head/fleet.yaml": fleetYAML("verify-head"), "head/cm.yaml": configMapDoc("app", "v0"),
		"tag/fleet.yaml": fleetYAML("verify-tag"), "tag/cm.yaml": configMapDoc("app", "v0"),
		"both/fleet.yaml": fleetYAML("verify-both"), "both/cm.yaml": configMapDoc("app", "v0"),
		"ssh-tag/fleet.yaml": fleetYAML("verify-ssh-tag"), "ssh-tag/cm.yaml": configMapDoc("app", "v0"),
	})
	// tagDoc is a GitRepo following revision under path, verified in mode.
	tagDoc := func(name, revision, path, mode string) string {
		return gitRepoDoc(name, repo.URL(), allClusters+"  pollingInterval: 1s\n  revision: "+revision+"\n  paths:\n  - "+path+"\n"+
			"  verify:\n    mode: "+mode+"\n    secretRef:\n      name: signers\n")
	}
	deployed := func(st status.GitRepo) bool {
		return st.Settled && st.Commit != "" && st.Rejected == nil && st.Summary.State == status.Ready && st.Summary.Ready == 1
	}
	c := newSigningClone(t, repo)
	alice := c.pgp + " (Alice Signer <alice@example.com>)"
	f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: signers\ndata:\n"+
		"  alice.asc: "+base64.StdEncoding.EncodeToString([]byte(c.pgpPublic))+"\n"+
		"  bob.pub: "+base64.StdEncoding.EncodeToString([]byte(c.sshPublic))+"\n")

	t.Run("HEAD", func(t *testing.T) {
		signed := c.commit(t, "head/cm.yaml", configMapDoc("app", "gpg"), c.withGPG())
		f.apply(t, gitRepoDoc("signed-head", repo.URL(), allClusters+"  pollingInterval: 1s\n  paths:\n  - head\n"+
			"  verify:\n    mode: HEAD\n    secretRef:\n      name: signers\n"))
		st := f.waitFor(t, "signed-head", "gpg-signed commit deployed", settledAt(signed, 1))
		assert.Equal(t, c.pgp+" (Alice Signer <alice@example.com>)", st.Verified)
		assertConfigMap(t, f, "verify-head", "gpg")

		unsigned := c.commit(t, "head/cm.yaml", configMapDoc("app", "unsigned"), nil)
		st = f.waitFor(t, "signed-head", "unsigned commit rejected", rejected(unsigned))
		assert.Equal(t, "not signed", st.Rejected.Reason)
		assert.Equal(t, signed, st.Commit, "the verified commit stays deployed")
		assertConfigMap(t, f, "verify-head", "gpg")
		out := f.cli(t, "status", "signed-head")
		assert.Contains(t, out, "Rejected: commit "+unsigned+" not deployed: not signed\n")
		assert.Contains(t, out, "Signed:   "+signed[:12]+" verified ("+c.pgp+" (Alice Signer <alice@example.com>))\n")

		bySSH := c.commit(t, "head/cm.yaml", configMapDoc("app", "ssh"), sshSigning(c.sshKey))
		st = f.waitFor(t, "signed-head", "ssh-signed commit deployed", settledAt(bySSH, 1))
		assert.Nil(t, st.Rejected)
		assert.Contains(t, st.Verified, "SHA256:")
		assert.Contains(t, st.Verified, "(bob@laptop)")
		assertConfigMap(t, f, "verify-head", "ssh")

		untrusted := c.commit(t, "head/cm.yaml", configMapDoc("app", "eve"), sshSigning(c.sshOther))
		st = f.waitFor(t, "signed-head", "commit by an unknown key rejected", rejected(untrusted))
		assert.Equal(t, "signed by a key that is not in Secret fleet-default/signers", st.Rejected.Reason)
		eve := strings.Fields(c.must(t, "ssh-keygen", "-l", "-f", c.sshOther+".pub"))
		assert.Equal(t, eve[1], st.Rejected.Key, "the status names the signing key")
		assert.Contains(t, f.cli(t, "status", "signed-head"), "Rejected: commit "+untrusted+
			" not deployed: signed by a key that is not in Secret fleet-default/signers (key "+eve[1]+")\n")
		assert.Equal(t, bySSH, st.Commit)
		assertConfigMap(t, f, "verify-head", "ssh")
	})

	t.Run("Tag", func(t *testing.T) {
		c.commit(t, "tag/cm.yaml", configMapDoc("app", "tagged"), nil) // the commit itself is not signed
		c.git(t, append(c.withGPG(), "tag", "-s", "-m", "release v1", "v1")...)
		c.git(t, "tag", "v1-light")
		c.git(t, "push", "-q", "origin", "refs/tags/v1", "refs/tags/v1-light")
		f.apply(t, tagDoc("signed-tag", "v1", "tag", "Tag"))
		st := f.waitFor(t, "signed-tag", "signed tag deployed", deployed)
		assert.Equal(t, "tag v1: "+alice, st.Verified)
		assertConfigMap(t, f, "verify-tag", "tagged")

		f.apply(t, tagDoc("light-tag", "v1-light", "tag", "Tag"))
		st = f.waitFor(t, "light-tag", "lightweight tag rejected", func(st status.GitRepo) bool { return st.Rejected != nil })
		assert.Equal(t, "v1-light", st.Rejected.Tag)
		assert.Equal(t, "tag v1-light is lightweight (not signed)", st.Rejected.Reason)
		assert.Empty(t, st.Deployments, "nothing deployed")
	})

	t.Run("TagAndHEAD", func(t *testing.T) {
		unsigned := c.commit(t, "both/cm.yaml", configMapDoc("app", "unsigned"), nil)
		c.git(t, append(c.withGPG(), "tag", "-s", "-m", "release v2", "v2")...)
		c.git(t, "push", "-q", "origin", "refs/tags/v2")
		f.apply(t, tagDoc("signed-both", "v2", "both", "TagAndHEAD"))
		st := f.waitFor(t, "signed-both", "signed tag on an unsigned commit rejected", func(st status.GitRepo) bool { return st.Rejected != nil })
		assert.Equal(t, unsigned, st.Rejected.Commit, "the commit is named")
		assert.Empty(t, st.Rejected.Tag, "the tag is signed: the commit is refused")
		assert.Equal(t, "not signed", st.Rejected.Reason)
		assert.Empty(t, st.Deployments, "nothing deployed")

		c.commit(t, "both/cm.yaml", configMapDoc("app", "both"), c.withGPG())
		c.git(t, append(c.withGPG(), "tag", "-f", "-s", "-m", "release v2 again", "v2")...)
		c.git(t, "push", "-q", "-f", "origin", "refs/tags/v2")
		st = f.waitFor(t, "signed-both", "signed tag on a signed commit deployed", deployed)
		assert.Equal(t, "tag v2: "+alice+", commit: "+alice, st.Verified)
		assertConfigMap(t, f, "verify-both", "both")
	})

	t.Run("SSHSignedTag", func(t *testing.T) {
		c.commit(t, "ssh-tag/cm.yaml", configMapDoc("app", "ssh-tagged"), nil)
		c.git(t, append(sshSigning(c.sshKey), "tag", "-s", "-m", "release v3", "v3")...)
		c.git(t, "push", "-q", "origin", "refs/tags/v3")
		f.apply(t, tagDoc("ssh-tag", "v3", "ssh-tag", "Tag"))
		st := f.waitFor(t, "ssh-tag", "ssh-signed tag deployed", deployed)
		bob := strings.Fields(c.must(t, "ssh-keygen", "-l", "-f", c.sshKey+".pub"))
		assert.Equal(t, "tag v3: "+bob[1]+" (bob@laptop)", st.Verified)
		assertConfigMap(t, f, "verify-ssh-tag", "ssh-tagged")
	})
	t.Logf("TestVerify took %s", time.Since(start).Round(time.Millisecond))
}

// rejected reports whether the status names commit as refused by spec.verify.
func rejected(commit string) func(status.GitRepo) bool {
	return func(st status.GitRepo) bool { return st.Rejected != nil && st.Rejected.Commit == commit }
}

// assertConfigMap checks the value of ConfigMap app in ns on cluster-1.
func assertConfigMap(t *testing.T, f *fleet, ns, value string) {
	t.Helper()
	cm, ok := f.configMap(t, "cluster-1", ns, "app")
	require.True(t, ok, "ConfigMap %s/app", ns)
	assert.Equal(t, value, cm.Data["value"])
}
