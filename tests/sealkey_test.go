package tests

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestSealKeyAuthenticated: the CLI seals only to a sealing key signed by
// the controllers' signing key. It pins the signer on first use and says
// so; a newer key of that signer is told; a --seal-key-fingerprint of
// another key is refused. A Temporal client without the signing key
// cannot publish a newer key next to the controllers' (the keys workflow
// refuses it), and when it replaces the keys workflow with its own keys,
// signed by another key or unsigned, or with the controllers' own older
// key (a rollback), `apply` of a Secret and `cluster add` refuse to seal,
// saying why and how to re-pin, and nothing is stored. A controller started then does not publish over those keys and
// logs why.
func TestSealKeyAuthenticated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and controllers")
	}
	f := &fleet{t: t, stateDir: t.TempDir()}
	f.w = startDevWorker(t, f.stateDir)
	keysDir := filepath.Join(f.stateDir, "seal-keys")
	waitLog(t, f.w.proc, `"msg":"Published sealing keys"`, time.Minute)
	fingerprint := loggedFingerprint(t, f.w.proc)
	out, err := exec.Command(bins.worker, "keygen", "--signing-key", "--out", keysDir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, fingerprint, strings.TrimSpace(string(out)), "keygen --signing-key prints the fingerprint the controller logs")

	pins := filepath.Join(t.TempDir(), "known-seal-keys")
	apply := func(name string, extra ...string) (stdout, stderr string, err error) {
		t.Helper()
		doc := writeTemp(t, name+".yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: "+name+
			"\n  namespace: fleet-default\nstringData:\n  token: s3cr3t-"+name+"\n")
		return f.cliErr(t, append([]string{"--known-seal-keys", pins, "apply", "-f", doc}, extra...)...)
	}
	c := f.w.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	published, err := cluster.PublishedKeys(ctx, c)
	require.NoError(t, err)
	require.Len(t, published, 1)
	genuine := published[0]

	// First use: the signer is pinned and its fingerprint told.
	stdout, stderr, err := apply("first")
	require.NoError(t, err, stderr)
	assert.Contains(t, stdout, "secret/fleet-default/first created (sealed to key "+genuine.ID+")")
	assert.Contains(t, stderr, "pinned the controllers' signing key "+fingerprint)
	pinned, err := os.ReadFile(pins)
	require.NoError(t, err)
	assert.Contains(t, string(pinned), " "+fingerprint+" "+genuine.ID+"\n")
	_, stderr, err = apply("second")
	require.NoError(t, err, stderr)
	assert.Empty(t, stderr, "nothing changed, nothing told")

	// --seal-key-fingerprint: another signer's is refused, the right one works.
	other := randomSigner(t).Fingerprint()
	_, stderr, err = apply("wrong-fp", "--seal-key-fingerprint", other)
	require.Error(t, err)
	assert.Contains(t, stderr, "refusing to seal to the controllers' sealing key "+genuine.ID+": it is signed by "+fingerprint+
		", not by the "+other+" given with --seal-key-fingerprint")
	assertSecretNotStored(ctx, t, c, "wrong-fp")
	_, stderr, err = apply("right-fp", "--seal-key-fingerprint", fingerprint)
	require.NoError(t, err, stderr)

	// A client without the signing key publishes a newer key next to the
	// controllers' with the controllers' own call: refused.
	attacker := randomSigner(t)
	forged := attacker.Sign(unsignedSealKey(t, "fk-29990101t000000z"))
	unsigned := unsignedSealKey(t, "fk-29990101t000001z")
	for _, k := range []seal.PublicKey{forged, unsigned} {
		_, err = cluster.PublishKeys(ctx, c, protocol.DefaultTaskQueue, []seal.PublicKey{k})
		var ae *temporal.ApplicationError
		require.ErrorAs(t, err, &ae, "publishing %s", k.ID)
		assert.Equal(t, seal.ErrTypeForeignSigner, ae.Type())
		assert.Contains(t, ae.Error(), "not signed by the signer of the published keys "+fingerprint)
	}
	stdout, _, err = apply("after-refused-publish")
	require.NoError(t, err)
	assert.Contains(t, stdout, "(sealed to key "+genuine.ID+")")

	// A newer key of the same signer (another controller holding the same
	// keyring plus a rotated key) is used and told.
	rotated := copyKeyring(t, keysDir)
	newKey, err := keyring.Generate()
	require.NoError(t, err)
	newKey.ID = "fk-29981231t235959z"
	require.NoError(t, keyring.WriteKey(rotated, newKey))
	ctrl := startSealController(t, f.w.frontend, rotated, "rotated")
	waitLog(t, ctrl, `"msg":"Published sealing keys"`, time.Minute)
	ctrl.Stop()
	stdout, stderr, err = apply("rotated")
	require.NoError(t, err, stderr)
	assert.Contains(t, stdout, "(sealed to key "+newKey.ID+")")
	assert.Contains(t, stderr, "the controllers' sealing key changed from "+genuine.ID+" to "+newKey.ID+" (signed by the trusted signing key "+fingerprint+")")

	// The same client ends the keys workflow and publishes its own keys,
	// or the controllers' older key again: the CLI refuses to seal to
	// them, says why and how to re-pin.
	kubeconfig := writeTemp(t, "inline.kubeconfig", inlineDataKubeconfig)
	for _, tc := range []struct {
		key      seal.PublicKey
		why, fix string
	}{
		{forged, "it is signed by " + attacker.Fingerprint() + ", not by " + fingerprint + ", the controllers' signing key pinned in " + pins,
			"run the command again with --seal-key-fingerprint <that fingerprint>"},
		{unsigned, "it is not signed, so anyone with access to the Temporal namespace could have published it",
			"run the command again with --seal-key-fingerprint <that fingerprint>"},
		{genuine, "it is older than " + newKey.ID + ", the key this CLI sealed to before", "delete this namespace's line from " + pins},
	} {
		k := tc.key
		require.NoError(t, c.TerminateWorkflow(ctx, protocol.KeysID, "", "replaced by a client without the signing key"))
		_, err = cluster.PublishKeys(ctx, c, protocol.DefaultTaskQueue, []seal.PublicKey{k})
		require.NoError(t, err)
		_, stderr, err = apply("forged")
		require.Error(t, err, "apply sealed to %s", k.ID)
		assert.Contains(t, stderr, "refusing to seal to the controllers' sealing key "+k.ID+": "+tc.why)
		assert.Contains(t, stderr, tc.fix)
		assertSecretNotStored(ctx, t, c, "forged")
		_, stderr, err = f.cliErr(t, "--known-seal-keys", pins, "cluster", "add", "forged", "--kubeconfig", kubeconfig)
		require.Error(t, err, "cluster add sealed to %s", k.ID)
		assert.Contains(t, stderr, "register cluster forged: refusing to seal to the controllers' sealing key "+k.ID+": "+tc.why)
		_, err = c.DescribeWorkflowExecution(ctx, protocol.ClusterID("forged"), "")
		var nf *serviceerror.NotFound
		require.ErrorAs(t, err, &nf, "cluster forged was not registered")
	}
	pinnedNow, err := os.ReadFile(pins)
	require.NoError(t, err)
	assert.Contains(t, string(pinnedNow), " "+fingerprint+" "+newKey.ID+"\n", "the pin is kept")

	// A controller does not publish over keys another signer signed.
	require.NoError(t, c.TerminateWorkflow(ctx, protocol.KeysID, "", "replaced by a client without the signing key"))
	_, err = cluster.PublishKeys(ctx, c, protocol.DefaultTaskQueue, []seal.PublicKey{forged})
	require.NoError(t, err)
	ctrl = startSealController(t, f.w.frontend, rotated, "refusing")
	waitLog(t, ctrl, "REFUSED to publish the sealing keys over keys this controller did not sign", time.Minute)
	ctrl.Stop()
	keys, err := cluster.PublishedKeys(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{forged.ID}, sealKeyIDs(keys), "the controller overwrote nothing")
}

// inlineDataKubeconfig carries its credentials as data; its server is never
// contacted (cluster add only seals and stores it).
const inlineDataKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: not-a-real-token}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`

var signingKeyLogRE = regexp.MustCompile(`"signingKey":"(SHA256:[A-Za-z0-9+/]{43})"`)

// loggedFingerprint is the signing key fingerprint a controller logged.
func loggedFingerprint(t *testing.T, p *testenv.Process) string {
	t.Helper()
	data, err := os.ReadFile(p.LogPath())
	require.NoError(t, err)
	m := signingKeyLogRE.FindSubmatch(data)
	require.NotNil(t, m, "the controller logs its signing key's fingerprint")
	return string(m[1])
}

func randomSigner(t *testing.T) *seal.Signer {
	t.Helper()
	seed := make([]byte, 32)
	_, err := rand.Read(seed)
	require.NoError(t, err)
	s, err := seal.NewSigner(seed)
	require.NoError(t, err)
	return s
}

// newPublicKey is a fresh X25519 public key named id, unsigned.
func unsignedSealKey(t *testing.T, id string) seal.PublicKey {
	t.Helper()
	k, err := keyring.Generate()
	require.NoError(t, err)
	k.ID = id
	r, err := keyring.New(k)
	require.NoError(t, err)
	o, err := seal.NewOpener(r)
	require.NoError(t, err)
	return o.Newest()
}

// copyKeyring copies a controller's keyring (sealing and signing keys).
func copyKeyring(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "seal-keys")
	require.NoError(t, os.MkdirAll(out, 0o700))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, e.Name()), data, 0o600))
	}
	return out
}

// startController starts a controller (no embedded server) on frontend
// with the keyring keys and a state dir of its own.
func startSealController(t *testing.T, frontend, keys, name string) *testenv.Process {
	t.Helper()
	return testenv.StartProcess(t, testenv.ProcessOptions{Name: "flotilla-controller-" + name, Path: bins.worker, Args: []string{
		"--temporal-address", frontend, "--state-dir", t.TempDir(), "--seal-keys", keys,
		"--webhook-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}})
}

func assertSecretNotStored(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	_, err := c.DescribeWorkflowExecution(ctx, protocol.SecretID("fleet-default", name), "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, fmt.Sprintf("secret %s was not stored", name))
}

func sealKeyIDs(keys []seal.PublicKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ID
	}
	return out
}
