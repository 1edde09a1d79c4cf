package activities

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/githubapp"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// secretValues are planted in Secrets; no error may contain one.
var secretValues = []string{"s3cret-pass", "ghp_t0ken", "-----BEGIN", "KEYDATA"}

func TestParseGitSecret(t *testing.T) {
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nKEYDATA\n-----END OPENSSH PRIVATE KEY-----\n"
	tests := []struct {
		name string
		typ  string
		data map[string]string
		// want is the parsed form; wantErr, when set, a part of the error
		// (a key name).
		want    gitSecret
		wantErr string
	}{
		{name: "basic", data: map[string]string{"username": "bob", "password": "s3cret-pass"},
			want: gitSecret{basic: &gitsource.Auth{Username: "bob", Password: "s3cret-pass"}}},
		{name: "token key: user git", data: map[string]string{"token": "ghp_t0ken"},
			want: gitSecret{basic: &gitsource.Auth{Username: "git", Password: "ghp_t0ken"}}},
		{name: "token key with username", data: map[string]string{"username": "bob", "token": "ghp_t0ken"},
			want: gitSecret{basic: &gitsource.Auth{Username: "bob", Password: "ghp_t0ken"}}},
		{name: "password alone is the username (Fleet)", typ: "kubernetes.io/basic-auth", data: map[string]string{"password": "ghp_t0ken"},
			want: gitSecret{basic: &gitsource.Auth{Username: "ghp_t0ken"}}},
		{name: "empty basic", data: map[string]string{"username": "bob"}, wantErr: `"password"`},
		{name: "ssh with known_hosts", typ: "kubernetes.io/ssh-auth", data: map[string]string{"ssh-privatekey": key, "known_hosts": "h ssh-ed25519 AAAA"},
			want: gitSecret{ssh: &gitsource.SSHAuth{PrivateKey: []byte(key), KnownHosts: []byte("h ssh-ed25519 AAAA")}}},
		{name: "ssh key without type or known_hosts", data: map[string]string{"ssh-privatekey": key},
			want: gitSecret{ssh: &gitsource.SSHAuth{PrivateKey: []byte(key)}}},
		{name: "an encrypted ssh key's passphrase in password", data: map[string]string{"ssh-privatekey": key, "password": "pass phrase"},
			want: gitSecret{ssh: &gitsource.SSHAuth{PrivateKey: []byte(key), Passphrase: []byte("pass phrase")}}},
		{name: "ssh-auth without key", typ: "kubernetes.io/ssh-auth", data: map[string]string{"known_hosts": "h ssh-ed25519 AAAA"}, wantErr: "ssh-privatekey"},
		{name: "GitHub App", data: map[string]string{"github_app_id": "123", "github_app_installation_id": "456\n", "github_app_private_key": key},
			want: gitSecret{app: &githubapp.App{ID: 123, InstallationID: 456, PrivateKey: []byte(key)}}},
		{name: "GitHub App without installation", data: map[string]string{"github_app_id": "123", "github_app_private_key": key}, wantErr: "github_app_installation_id"},
		{name: "GitHub App without key", data: map[string]string{"github_app_id": "123", "github_app_installation_id": "456"}, wantErr: "github_app_private_key"},
		{name: "GitHub App without ID", data: map[string]string{"github_app_installation_id": "456", "github_app_private_key": key}, wantErr: "github_app_id"},
		{name: "GitHub App ID not numeric", data: map[string]string{"github_app_id": "KEYDATA", "github_app_installation_id": "456", "github_app_private_key": key}, wantErr: "github_app_id"},
		{name: "GitHub App installation negative", data: map[string]string{"github_app_id": "1", "github_app_installation_id": "-4", "github_app_private_key": key}, wantErr: "github_app_installation_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tt.data {
				data[k] = []byte(v)
			}
			got, err := parseGitSecret(tt.typ, data)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assertNoSecret(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	for _, v := range secretValues {
		assert.NotContains(t, err.Error(), v)
	}
}

// gitSecrets is a SecretSource of Secrets by name.
type gitSecrets map[string]map[string]string

func (s gitSecrets) Load(_, name string) (string, string, error) {
	return "", "", fmt.Errorf("secret %s: %w", name, cluster.ErrNotFound)
}

func (s gitSecrets) SecretData(_ context.Context, _, name string) (string, map[string][]byte, error) {
	d, ok := s[name]
	if !ok {
		return "", nil, fmt.Errorf("secret %s: %w", name, cluster.ErrNotFound)
	}
	data := map[string][]byte{}
	for k, v := range d {
		data[k] = []byte(v)
	}
	return "", data, nil
}

func TestRemote(t *testing.T) {
	const fileHosts = "file.example ssh-ed25519 AAAAfile\n"
	const hostKeyNotChecked = "the host key of h:r.git is not checked (insecureSkipHostKeyChecks): anyone between Flotilla and the host can serve any commit"
	khFile := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(khFile, []byte(fileHosts), 0o600))
	secrets := gitSecrets{
		"basic":  {"username": "bob", "password": "s3cret-pass"},
		"ssh":    {"ssh-privatekey": "KEYDATA"},
		"ssh-kh": {"ssh-privatekey": "KEYDATA", "known_hosts": "secret.example ssh-ed25519 AAAAsecret\n"},
		"bad":    {"github_app_id": "KEYDATA"},
	}
	tests := []struct {
		name string
		spec api.GitRepoSpec
		// workerInsecure is --insecure-skip-host-key-checks.
		workerInsecure bool
		// check inspects a built remote; wantErrType, when set, is the
		// ApplicationError's type and wantErr a part of its message.
		check func(t *testing.T, r gitsource.Remote)
		// wantWarnings are the status warnings, exactly.
		wantWarnings []string
		wantErrType  string
		wantErr      string
	}{
		{name: "https anonymous with caBundle", spec: api.GitRepoSpec{Repo: "https://h/r", CABundle: []byte("PEM")},
			check: func(t *testing.T, r gitsource.Remote) {
				assert.Nil(t, r.Auth)
				assert.Nil(t, r.SSH)
				assert.Equal(t, []byte("PEM"), r.CABundle)
			}},
		{name: "https basic", spec: api.GitRepoSpec{Repo: "https://h/r", ClientSecretName: "basic"},
			check: func(t *testing.T, r gitsource.Remote) {
				assert.Equal(t, &gitsource.Auth{Username: "bob", Password: "s3cret-pass"}, r.Auth)
			}},
		{name: "ssh key on https", spec: api.GitRepoSpec{Repo: "https://h/r", ClientSecretName: "ssh"},
			wantErrType: ErrTypeSecretNotFound, wantErr: "not an ssh:// or scp-like URL"},
		{name: "basic on ssh", spec: api.GitRepoSpec{Repo: "git@h:r.git", ClientSecretName: "basic"},
			wantErrType: ErrTypeSecretNotFound, wantErr: "the secret needs ssh-privatekey"},
		{name: "missing secret", spec: api.GitRepoSpec{Repo: "https://h/r", ClientSecretName: "nope"},
			wantErrType: ErrTypeSecretNotFound, wantErr: `clientSecretName "nope": no such secret`},
		{name: "invalid secret names the key", spec: api.GitRepoSpec{Repo: "https://h/r", ClientSecretName: "bad"},
			wantErrType: ErrTypeSecretNotFound, wantErr: "github_app_id"},
		{name: "ssh: secret's known_hosts win", spec: api.GitRepoSpec{Repo: "ssh://git@h/r", ClientSecretName: "ssh-kh"},
			check: func(t *testing.T, r gitsource.Remote) {
				assert.Equal(t, "secret.example ssh-ed25519 AAAAsecret\n", string(r.SSH.KnownHosts))
				assert.False(t, r.SSH.InsecureIgnoreHostKey)
			}},
		{name: "ssh: worker's known_hosts file", spec: api.GitRepoSpec{Repo: "git@h:r.git", ClientSecretName: "ssh"},
			check: func(t *testing.T, r gitsource.Remote) { assert.Equal(t, fileHosts, string(r.SSH.KnownHosts)) }},
		{name: "ssh: insecureSkipHostKeyChecks warns", spec: api.GitRepoSpec{Repo: "git@h:r.git", ClientSecretName: "ssh", InsecureSkipHostKeyChecks: true},
			wantWarnings: []string{hostKeyNotChecked},
			check:        func(t *testing.T, r gitsource.Remote) { assert.True(t, r.SSH.InsecureIgnoreHostKey) }},
		{name: "ssh: worker flag warns", spec: api.GitRepoSpec{Repo: "git@h:r.git", ClientSecretName: "ssh"}, workerInsecure: true,
			wantWarnings: []string{hostKeyNotChecked},
			check:        func(t *testing.T, r gitsource.Remote) { assert.True(t, r.SSH.InsecureIgnoreHostKey) }},
		{name: "https: insecureSkipHostKeyChecks has no effect", spec: api.GitRepoSpec{Repo: "https://bob:s3cret-pass@h/r", InsecureSkipHostKeyChecks: true},
			wantWarnings: []string{"insecureSkipHostKeyChecks has no effect on https://h/r: host keys are checked only for SSH repositories"},
			check:        func(t *testing.T, r gitsource.Remote) { assert.Nil(t, r.SSH) }},
		{name: "https: worker flag is not named", spec: api.GitRepoSpec{Repo: "https://h/r"}, workerInsecure: true,
			check: func(t *testing.T, r gitsource.Remote) { assert.Nil(t, r.SSH) }},
		{name: "ssh: caBundle and insecureSkipTLSVerify are not used",
			spec: api.GitRepoSpec{Repo: "ssh://git@h/r", ClientSecretName: "ssh-kh", CABundle: []byte("PEM"), InsecureSkipTLSVerify: true},
			wantWarnings: []string{
				"caBundle is not used for ssh://h/r: it is only for https repositories and the GitHub App API",
				"insecureSkipTLSVerify has no effect on ssh://h/r: it is only for https repositories and the GitHub App API",
			},
			check: func(t *testing.T, r gitsource.Remote) { assert.False(t, r.SSH.InsecureIgnoreHostKey) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Activities{Secrets: secrets, KnownHostsFile: khFile, InsecureSkipHostKeyChecks: tt.workerInsecure}
			r, warnings, err := a.remote(context.Background(), GitRepoRef{Namespace: "ns", Name: "repo"}, tt.spec)
			if tt.wantErrType != "" {
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr)
				assert.Equal(t, tt.wantErrType, appErr.Type())
				assert.True(t, appErr.NonRetryable())
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "ns/repo")
				assertNoSecret(t, err)
				return
			}
			require.NoError(t, err)
			tt.check(t, r)
			assert.Equal(t, tt.wantWarnings, warnings)
			for _, w := range warnings {
				assert.NotContains(t, w, "s3cret-pass")
				assert.NotContains(t, w, "KEYDATA")
			}
		})
	}
}

// TestRemote_GitHubApp mints a token at a stand-in token endpoint over TLS
// trusted through caBundle, and classifies the endpoint's refusals.
func TestRemote_GitHubApp(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	status, requests := http.StatusCreated, 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "120")
		}
		w.WriteHeader(status)
		if status == http.StatusCreated {
			_ = json.NewEncoder(w).Encode(map[string]any{"token": "ghs_minted", "expires_at": time.Now().Add(time.Hour)})
		}
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	secrets := gitSecrets{
		"app":    {"github_app_id": "1", "github_app_installation_id": "2", "github_app_private_key": pemKey},
		"notkey": {"github_app_id": "1", "github_app_installation_id": "2", "github_app_private_key": "KEYDATA"},
	}
	spec := api.GitRepoSpec{Repo: srv.URL + "/org/repo", ClientSecretName: "app", CABundle: ca}
	tests := []struct {
		name        string
		status      int
		secret      string
		wantErrType string // "": a token
		retryable   bool
		noCA        bool // caBundle left out
		noRequest   bool // the token endpoint is not asked
	}{
		{name: "minted", status: http.StatusCreated, secret: "app"},
		{name: "refused", status: http.StatusUnauthorized, secret: "app", wantErrType: ErrTypeGitAuth},
		{name: "server error", status: http.StatusBadGateway, secret: "app", wantErrType: "Git", retryable: true},
		{name: "not a key", status: http.StatusCreated, secret: "notkey", wantErrType: ErrTypeSecretNotFound},
		{name: "untrusted certificate", status: http.StatusCreated, secret: "app", noCA: true, wantErrType: ErrTypeGitTLS},
		// Last: the host is then waited for by every later request.
		{name: "rate limited", status: http.StatusTooManyRequests, secret: "app", wantErrType: ErrTypeGitRateLimited},
		{name: "held back", status: http.StatusCreated, secret: "app", wantErrType: ErrTypeGitRateLimited, noRequest: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status = tt.status
			a := &Activities{Secrets: secrets}
			spec := spec
			spec.ClientSecretName = tt.secret
			if tt.noCA {
				spec.CABundle = nil
			}
			before := requests
			r, _, err := a.remote(context.Background(), GitRepoRef{Namespace: "ns", Name: "repo"}, spec)
			if tt.noRequest {
				assert.Equal(t, before, requests)
			}
			if tt.wantErrType == "" {
				require.NoError(t, err)
				assert.Equal(t, &gitsource.Auth{Username: "x-access-token", Password: "ghs_minted"}, r.Auth)
				return
			}
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Equal(t, tt.wantErrType, appErr.Type())
			assert.Equal(t, !tt.retryable, appErr.NonRetryable())
			assert.Contains(t, err.Error(), "ns/repo")
			assertNoSecret(t, err)
			assert.False(t, strings.Contains(err.Error(), "eyJ"), "no JWT in %v", err)
		})
	}
}
