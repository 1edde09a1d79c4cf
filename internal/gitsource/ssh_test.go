package gitsource

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestSSHEndpoint covers URL handling without a server: the user, the URL
// go-git gets, and refusals before any connection.
func TestSSHEndpoint(t *testing.T) {
	key, _ := testenv.NewSSHKey(t)
	kh := []byte("github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	tests := []struct {
		name, url, user string
		wantURL         string
		wantUser        string
	}{
		{"scp-like", "git@github.com:org/repo.git", "", "github.com:org/repo.git", "git"},
		{"scp-like, other user", "deploy@github.com:org/repo.git", "", "github.com:org/repo.git", "deploy"},
		{"scp-like without user", "github.com:org/repo.git", "", "github.com:org/repo.git", "git"},
		{"ssh with port", "ssh://git@github.com:2222/org/repo.git", "", "ssh://github.com:2222/org/repo.git", "git"},
		{"git+ssh", "git+ssh://git@github.com/org/repo.git", "", "ssh://github.com/org/repo.git", "git"},
		{"password dropped", "ssh://git:hunter2@github.com/org/repo.git", "", "ssh://github.com/org/repo.git", "git"},
		{"SSHAuth.User wins", "ssh://alice@github.com/org/repo.git", "bob", "ssh://github.com/org/repo.git", "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, err := Remote{URL: tt.url, SSH: &SSHAuth{User: tt.user, PrivateKey: key, KnownHosts: kh}}.endpoint()
			require.NoError(t, err)
			assert.Equal(t, tt.wantURL, ep.url)
			require.NotNil(t, ep.ssh)
			assert.Equal(t, tt.wantUser, ep.ssh.user)
			assert.NotContains(t, ep.ssh.String(), "PRIVATE")
		})
	}

	refusals := []struct {
		name string
		auth *SSHAuth
		want error
		says string
	}{
		{"no key", &SSHAuth{KnownHosts: kh}, ErrAuth, "ssh-privatekey"},
		{"not a key", &SSHAuth{PrivateKey: []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0\n-----END OPENSSH PRIVATE KEY-----\n"), KnownHosts: kh}, ErrAuth, "cannot be read"},
		{"no known_hosts", &SSHAuth{PrivateKey: key}, ErrHostKey, "--ssh-known-hosts"},
		{"bad known_hosts", &SSHAuth{PrivateKey: key, KnownHosts: []byte("github.com ssh-ed25519 !!!\n")}, ErrHostKey, "known_hosts"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), Remote{URL: "git@github.com:org/repo.git", SSH: tt.auth}, "main", "")
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.says)
			assert.NotContains(t, err.Error(), "c2VjcmV0")
		})
	}
}

// TestSSHEncryptedKey: an encrypted private key opens with its passphrase
// only, and no error quotes the key or the passphrase.
func TestSSHEncryptedKey(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("open-sesame"))
	require.NoError(t, err)
	key := pem.EncodeToMemory(block)
	kh := []byte("github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	remote := func(pass string) Remote {
		return Remote{URL: "git@github.com:org/repo.git", SSH: &SSHAuth{PrivateKey: key, Passphrase: []byte(pass), KnownHosts: kh}}
	}

	_, err = remote("open-sesame").endpoint()
	require.NoError(t, err)
	for pass, says := range map[string]string{"": "encrypted and no passphrase", "wrong": "wrong passphrase"} {
		_, err := remote(pass).endpoint()
		require.ErrorIs(t, err, ErrAuth)
		assert.Contains(t, err.Error(), says)
		assert.NotContains(t, err.Error(), "open-sesame")
		assert.NotContains(t, err.Error(), string(key[40:80]))
	}
}

// TestSSH runs Resolve and Cache.Checkout against Debian's sshd serving a
// bare repository through git-shell.
func TestSSH(t *testing.T) {
	srv := testenv.StartSSHGitServer(t)
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", map[string]string{"app/cm.yaml": "v1"})
	url := srv.RepoURL(repo.Dir())
	key, pub := testenv.NewSSHKey(t)
	srv.Authorize(t, pub)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	remote := func(kh string) Remote {
		return Remote{URL: url, SSH: &SSHAuth{PrivateKey: key, KnownHosts: []byte(kh)}}
	}

	t.Run("deploy key with [host]:port known_hosts", func(t *testing.T) {
		// fleet#4259: a known_hosts entry for a port other than 22.
		ref, err := Resolve(ctx, remote("# comment\n"+srv.KnownHostsLine()+"\n"), "master", "")
		require.NoError(t, err)
		assert.Equal(t, repo.Head(t), ref.Commit)

		dir, _, err := NewCache(t.TempDir()).Checkout(ctx, remote(srv.KnownHostsLine()), ref)
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(dir, "app", "cm.yaml"))
		require.NoError(t, err)
		assert.Equal(t, "v1", string(data))
	})

	t.Run("hashed known_hosts (ssh-keyscan -H)", func(t *testing.T) {
		host, key, _ := strings.Cut(srv.KnownHostsLine(), " ")
		ref, err := Resolve(ctx, remote(knownhosts.HashHostname(host)+" "+key), "master", "")
		require.NoError(t, err)
		assert.Equal(t, repo.Head(t), ref.Commit)
	})

	t.Run("a line without the port does not match another port", func(t *testing.T) {
		_, key, _ := strings.Cut(srv.KnownHostsLine(), " ")
		_, err := Resolve(ctx, remote("127.0.0.1 "+key), "master", "")
		require.ErrorIs(t, err, ErrHostKey)
	})

	t.Run("new commit fetched into the same clone", func(t *testing.T) {
		cache := NewCache(t.TempDir())
		ref, err := Resolve(ctx, remote(srv.KnownHostsLine()), "master", "")
		require.NoError(t, err)
		_, _, err = cache.Checkout(ctx, remote(srv.KnownHostsLine()), ref)
		require.NoError(t, err)
		next := repo.Commit(t, map[string]string{"app/cm.yaml": "v2"}, "v2")
		dir, _, err := cache.Checkout(ctx, remote(srv.KnownHostsLine()), Ref{Commit: next})
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(dir, "app", "cm.yaml"))
		require.NoError(t, err)
		assert.Equal(t, "v2", string(data))
	})

	t.Run("unknown host refused naming host and fingerprint", func(t *testing.T) {
		other := "[127.0.0.1]:1 " + strings.SplitN(srv.KnownHostsLine(), " ", 2)[1]
		_, err := Resolve(ctx, remote(other), "master", "")
		var hk *HostKeyError
		require.ErrorAs(t, err, &hk)
		require.ErrorIs(t, err, ErrHostKey)
		assert.Empty(t, hk.Known)
		assert.Contains(t, err.Error(), "host key of [127.0.0.1]:"+strconv.Itoa(srv.Port())+" (ssh-ed25519 "+srv.HostKeyFingerprint()+") is not in known_hosts")
	})

	t.Run("wrong key refused as ErrAuth", func(t *testing.T) {
		stranger, _ := testenv.NewSSHKey(t)
		_, err := Resolve(ctx, Remote{URL: url, SSH: &SSHAuth{PrivateKey: stranger, KnownHosts: []byte(srv.KnownHostsLine())}}, "master", "")
		require.ErrorIs(t, err, ErrAuth)
		assert.NotErrorIs(t, err, ErrHostKey)
		assert.NotContains(t, err.Error(), string(stranger[40:80]))
	})

	t.Run("missing repository", func(t *testing.T) {
		_, err := Resolve(ctx, Remote{URL: srv.RepoURL(filepath.Join(t.TempDir(), "nope.git")),
			SSH: &SSHAuth{PrivateKey: key, KnownHosts: []byte(srv.KnownHostsLine())}}, "master", "")
		require.ErrorIs(t, err, ErrRepositoryNotFound)
	})

	t.Run("changed host key refused, insecure accepts it", func(t *testing.T) {
		old, oldFP := srv.KnownHostsLine(), srv.HostKeyFingerprint()
		srv.RotateHostKey(t)
		_, err := Resolve(ctx, remote(old), "master", "")
		var hk *HostKeyError
		require.ErrorAs(t, err, &hk)
		assert.Equal(t, []string{oldFP}, hk.Known)
		assert.Contains(t, err.Error(), "host key of [127.0.0.1]:"+strconv.Itoa(srv.Port())+" changed: the server offers "+
			srv.HostKeyFingerprint()+", known_hosts has "+oldFP)

		insecure := remote("")
		insecure.SSH.InsecureIgnoreHostKey = true
		ref, err := Resolve(ctx, insecure, "master", "")
		require.NoError(t, err)
		assert.Equal(t, repo.Head(t), ref.Commit)
		_, _, err = NewCache(t.TempDir()).Checkout(ctx, insecure, ref)
		require.NoError(t, err)
	})
}

func TestPreferAlgorithms(t *testing.T) {
	tests := []struct {
		name  string
		known []string
	}{
		{"host unknown: all supported", []string{}},
		{"ed25519 known: first", []string{ssh.KeyAlgoED25519}},
		{"rsa known: its algorithms first, ssh-rsa kept", []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := preferAlgorithms(tt.known)
			assert.Equal(t, tt.known, got[:len(tt.known)], "known types first")
			for _, a := range ssh.SupportedAlgorithms().HostKeys {
				assert.Contains(t, got, a)
			}
			seen := map[string]bool{}
			for _, a := range got {
				assert.False(t, seen[a], "%s twice", a)
				seen[a] = true
			}
		})
	}
}
