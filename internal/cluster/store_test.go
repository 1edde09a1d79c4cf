package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

const token = "tok-3xXSecretValue-zz9"

// caPEM returns a freshly generated self-signed CA certificate.
func caPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// kubeconfig returns a kubeconfig with two contexts, "dev" (current,
// token auth, embedded CA) and "prod" (password auth), and the CA.
func kubeconfig(t *testing.T) (data, ca []byte) {
	t.Helper()
	ca = caPEM(t)
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: %s
- name: prod-cluster
  cluster:
    server: https://127.0.0.1:7443
    insecure-skip-tls-verify: true
users:
- name: dev-user
  user:
    token: %s
- name: prod-user
  user:
    username: admin
    password: prod-%s
contexts:
- name: dev
  context: {cluster: dev-cluster, user: dev-user, namespace: apps}
- name: prod
  context: {cluster: prod-cluster, user: prod-user}
`, base64.StdEncoding.EncodeToString(ca), token, token), ca
}

func TestStore_SaveAndLoad(t *testing.T) {
	data, ca := kubeconfig(t)
	dir := filepath.Join(t.TempDir(), "clusters")
	s := NewStore(dir)

	hash, err := s.Save("dev", data, "")
	require.NoError(t, err)
	assert.Len(t, hash, 64)

	info, err := os.Stat(filepath.Join(dir, "dev.kubeconfig"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	dinfo, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dinfo.Mode().Perm())

	cfg, err := s.RESTConfig("dev")
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:6443", cfg.Host)
	assert.Equal(t, token, cfg.BearerToken)
	assert.Equal(t, ca, cfg.CAData)
	assert.Empty(t, cfg.CAFile)

	// The stored file is self-contained and holds the chosen context only.
	stored, err := clientcmd.LoadFromFile(filepath.Join(dir, "dev.kubeconfig"))
	require.NoError(t, err)
	assert.Equal(t, "dev", stored.CurrentContext)
	assert.Len(t, stored.Contexts, 1)
	assert.Len(t, stored.AuthInfos, 1)
	assert.Len(t, stored.Clusters, 1)
	assert.NotContains(t, string(must(os.ReadFile(filepath.Join(dir, "dev.kubeconfig")))), "prod-"+token)

	got, err := s.Hash("dev")
	require.NoError(t, err)
	assert.Equal(t, hash, got)

	again, err := s.Save("dev", data, "")
	require.NoError(t, err)
	assert.Equal(t, hash, again, "the same input stores the same bytes")

	_, err = s.Save("prod", data, "prod")
	require.NoError(t, err)
	cfg, err = s.RESTConfig("prod")
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:7443", cfg.Host)
	assert.Equal(t, "admin", cfg.Username)

	names, err := s.Names()
	require.NoError(t, err)
	assert.Equal(t, []string{"dev", "prod"}, names)

	require.NoError(t, s.Remove("dev"))
	require.NoError(t, s.Remove("dev"), "remove is idempotent")
	names, err = s.Names()
	require.NoError(t, err)
	assert.Equal(t, []string{"prod"}, names)

	_, err = s.RESTConfig("dev")
	require.ErrorIs(t, err, ErrNotFound)
	assert.EqualError(t, err, `cluster "dev" not found in `+dir)
	_, err = s.Hash("dev")
	require.ErrorIs(t, err, ErrNotFound)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestStore_EmptyStore(t *testing.T) {
	s := NewStore(filepath.Join(t.TempDir(), "never-written"))
	names, err := s.Names()
	require.NoError(t, err)
	assert.Empty(t, names)
	require.NoError(t, s.Remove("x"))
}

// TestStore_SaveFile_RefusesFileReferences: files a kubeconfig names are
// never read, relative or not; nothing is written.
func TestStore_SaveFile_RefusesFileReferences(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM(t), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600))
	path := filepath.Join(dir, "config")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", certificate-authority: ca.crt}}]
users: [{name: u, user: {tokenFile: token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
`), 0o600))

	stored := filepath.Join(t.TempDir(), "clusters")
	_, err := NewStore(stored).SaveFile("edge", path, "")
	var ke *KubeconfigError
	require.ErrorAs(t, err, &ke)
	assert.Equal(t, path, ke.File)
	assert.Contains(t, err.Error(), "clusters[c].cluster.certificate-authority: Forbidden: a file path; embed the CA as certificate-authority-data")
	assert.Contains(t, err.Error(), "users[u].user.tokenFile: Forbidden: a file path; embed the token as token")
	assert.NotContains(t, err.Error(), token)
	assert.NoDirExists(t, stored, "nothing written")
}

func TestStore_SaveErrors(t *testing.T) {
	data, _ := kubeconfig(t)
	tests := []struct {
		name       string
		cluster    string
		kubeconfig string
		context    string
		wantIs     error
		wantMsg    []string // substrings of the message
	}{
		{
			name: "missing context lists the available ones", cluster: "c", kubeconfig: string(data), context: "staging",
			wantIs: ErrInvalidKubeconfig, wantMsg: []string{`context "staging" not found`, "available: dev, prod"},
		},
		{
			name: "no current context", cluster: "c", kubeconfig: strings.Replace(string(data), "current-context: dev\n", "", 1),
			wantIs: ErrInvalidKubeconfig, wantMsg: []string{"no current-context", "available: dev, prod"},
		},
		{
			name: "empty kubeconfig", cluster: "c", kubeconfig: "",
			wantIs: ErrInvalidKubeconfig, wantMsg: []string{"available: none"},
		},
		{
			name: "not YAML", cluster: "c", kubeconfig: "users:\n- name: u\n  user:\n    token: " + token + "\n  : bad\n\t x",
			wantIs: ErrInvalidKubeconfig,
		},
		{
			name: "wrong type", cluster: "c", kubeconfig: "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: [" + token + "]\n",
			wantIs: ErrInvalidKubeconfig,
		},
		{
			name: "bad base64", cluster: "c", kubeconfig: "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    client-key-data: " + token + "\n",
			wantIs: ErrInvalidKubeconfig,
		},
		{
			name: "context naming a missing user", cluster: "c", context: "broken",
			kubeconfig: strings.Replace(string(data), "contexts:\n", "contexts:\n- name: broken\n  context: {cluster: dev-cluster, user: ghost}\n", 1),
			wantIs:     ErrInvalidKubeconfig,
		},
		{
			name: "file reference", cluster: "c",
			kubeconfig: strings.Replace(string(data), "    token: "+token, "    token: "+token+"\n    client-certificate: /nonexistent/"+token+".crt", 1),
			wantIs:     ErrInvalidKubeconfig, wantMsg: []string{"users[dev-user].user.client-certificate: Forbidden", "client-certificate-data"},
		},
		{
			name: "no server", cluster: "c",
			kubeconfig: strings.Replace(string(data), "    server: https://127.0.0.1:6443\n", "", 1),
			wantIs:     ErrInvalidKubeconfig, wantMsg: []string{"build client configuration"},
		},
		{name: "uppercase name", cluster: "Dev", kubeconfig: string(data), wantIs: ErrInvalidName},
		{name: "path in name", cluster: "../etc", kubeconfig: string(data), wantIs: ErrInvalidName},
		{name: "empty name", cluster: "", kubeconfig: string(data), wantIs: ErrInvalidName},
		{name: "too long", cluster: strings.Repeat("a", 64), kubeconfig: string(data), wantIs: ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := NewStore(dir).Save(tt.cluster, []byte(tt.kubeconfig), tt.context)
			require.ErrorIs(t, err, tt.wantIs)
			for _, m := range tt.wantMsg {
				assert.Contains(t, err.Error(), m)
			}
			assert.NotContains(t, err.Error(), token)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing written")
		})
	}
}

func TestStore_NamesValidated(t *testing.T) {
	s := NewStore(t.TempDir())
	for _, name := range []string{"../x", "a/b", "", "A"} {
		_, err := s.RESTConfig(name)
		require.ErrorIs(t, err, ErrInvalidName, name)
		_, err = s.Hash(name)
		require.ErrorIs(t, err, ErrInvalidName, name)
		require.ErrorIs(t, s.Remove(name), ErrInvalidName, name)
	}
}

func TestStore_CorruptFileErrorHidesToken(t *testing.T) {
	dir := t.TempDir()
	// A stored file that parses but cannot become a client configuration.
	bad := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\n" +
		"users: [{name: u, user: {token: " + token + "}}]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.kubeconfig"), []byte(bad), 0o600))
	_, err := NewStore(dir).RESTConfig("c")
	require.ErrorIs(t, err, ErrInvalidKubeconfig)
	assert.NotContains(t, err.Error(), token)
}

func TestScrub(t *testing.T) {
	assert.Equal(t, "a [redacted] b [redacted]", scrub("a secret b secret", []string{"secret", ""}))
	assert.Equal(t, "x [redacted] y", scrub("x long-secret y", []string{"long-secret", "secret"}))
}
