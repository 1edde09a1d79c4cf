package tests

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestKubeconfigCarriesNoCommands: a kubeconfig whose user is an exec
// plugin (a script that writes a canary file and would answer with the
// cluster's real token), with a tokenFile holding that token and a
// proxy-url, is refused by `flotilla cluster add`, which says what to embed
// instead. Stored anyway (sealed and applied by hand, as the CLI would)
// and targeted by a GitRepo, it runs nothing: the canary is never
// written, the token file never used, the proxy never dialled, nothing is
// deployed; the deployment reports that no inline credentials are left,
// the controller logs the ignored fields once and keeps running, and
// deploys to the same API server added with an inline-data kubeconfig.
func TestKubeconfigCarriesNoCommands(t *testing.T) {
	f := startFleet(t, 1, 0)
	kube := f.clusters[0]
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	proxy := startDialRecorder(t)
	path := craftedKubeconfig(t, kube, dir, canary, proxy.addr)

	// (a) The CLI refuses it, naming each field and what to embed.
	_, stderr, err := f.cliErr(t, "cluster", "add", "crafted", "--kubeconfig", path, "--label", "kc=crafted")
	require.Error(t, err)
	for _, want := range []string{
		"users[admin].user.exec: Forbidden: runs a command; embed the credential instead: token, or client-certificate-data and client-key-data",
		"users[admin].user.tokenFile: Forbidden: a file path; embed the token as token",
		"clusters[crafted].cluster.proxy-url: Forbidden",
	} {
		assert.Contains(t, stderr, want)
	}
	assert.NotContains(t, f.cli(t, "cluster", "list"), "crafted", "nothing was registered")

	// (b) Stored by hand, bypassing the CLI's check, and targeted.
	storeKubeconfig(t, f, "crafted", path, map[string]string{"kc": "crafted"})
	repo := f.git.CreateRepo(t, "crafted", map[string]string{"fleet.yaml": fleetYAML("crafted-ns"), "cm.yaml": configMapDoc("crafted", "v1")})
	f.apply(t, gitRepoDoc("crafted", repo.URL(), selectorTarget("kc", "crafted")))
	st := f.waitFor(t, "crafted", "the cluster reports its kubeconfig", func(st status.GitRepo) bool {
		for _, d := range st.Deployments {
			if d.Cluster == "crafted" && strings.Contains(d.Message, "no inline credentials") {
				return true
			}
		}
		return false
	})
	for _, d := range st.Deployments {
		assert.Equal(t, status.WaitApplied, d.State, "nothing was applied: %+v", d)
		assert.Contains(t, d.Message, "users[admin].user.exec")
		assert.NotContains(t, d.Message, canary)
	}
	waitLog(t, f.w.proc, "Ignored kubeconfig fields", 30*time.Second)

	assert.NoFileExists(t, canary, "the exec plugin never ran")
	assert.False(t, proxy.dialled.Load(), "the proxy was never dialled")
	_, err = kube.Clientset(t).CoreV1().ConfigMaps("crafted-ns").Get(t.Context(), "crafted", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was deployed: %v", err)

	// The same API server with an inline-data kubeconfig is added and
	// deployed to; the crafted one keeps failing, and is not warned about
	// again.
	f.cli(t, "cluster", "add", "plain", "--kubeconfig", kube.KubeconfigPath, "--label", "kc=crafted")
	f.waitFor(t, "crafted", "deployed to the plain cluster", func(st status.GitRepo) bool {
		for _, d := range st.Deployments {
			if d.Cluster == "plain" && d.State == status.Ready {
				return true
			}
		}
		return false
	})
	assert.NoFileExists(t, canary, "the exec plugin never ran")
	logs, err := os.ReadFile(f.w.proc.LogPath())
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(logs), "Ignored kubeconfig fields"), "warned once")
	assert.Contains(t, string(logs), `"fields":["clusters[crafted].cluster.proxy-url","users[admin].user.exec","users[admin].user.tokenFile"]`)
	for _, secret := range []string{canary, proxy.addr, filepath.Join(dir, "token")} {
		assert.NotContains(t, string(logs), secret, "the log names fields, never values")
	}
	select {
	case <-f.w.proc.Done():
		t.Fatalf("the controller exited: %v\n%s", f.w.proc.ExitErr(), f.w.proc.LogTail(30))
	default:
	}
}

// craftedKubeconfig writes a kubeconfig for kube's API server whose user
// is an exec plugin (writing canary, then answering with the cluster's
// token) and a tokenFile holding that token, and whose cluster names
// proxyAddr as its proxy. Every credential it has is one a controller
// must not follow.
func craftedKubeconfig(t *testing.T, kube *testenv.Cluster, dir, canary, proxyAddr string) string {
	t.Helper()
	given, err := clientcmd.Load(kube.Kubeconfig)
	require.NoError(t, err)
	var token string
	for _, u := range given.AuthInfos {
		token = u.Token
	}
	var caData []byte
	for _, c := range given.Clusters {
		caData = c.CertificateAuthorityData
	}
	require.NotEmpty(t, token)
	plugin, tokenFile := filepath.Join(dir, "plugin.sh"), filepath.Join(dir, "token")
	script := fmt.Sprintf("#!/bin/sh\ntouch %q\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}'\n",
		canary, token)
	require.NoError(t, os.WriteFile(plugin, []byte(script), 0o700)) //nolint:gosec // the plugin must be executable
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: crafted
clusters: [{name: crafted, cluster: {server: %q, certificate-authority-data: %s, proxy-url: "http://%s"}}]
users: [{name: admin, user: {tokenFile: %q, exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Never}}}]
contexts: [{name: crafted, context: {cluster: crafted, user: admin}}]
`, kube.Server, base64.StdEncoding.EncodeToString(caData), proxyAddr, tokenFile, plugin)
	return writeTemp(t, "crafted.kubeconfig", doc)
}

// storeKubeconfig registers cluster name with the kubeconfig at path as
// `flotilla cluster add` stores one (sealed to the controllers' key, in
// the cluster's apply update), without the CLI's checks.
func storeKubeconfig(t *testing.T, f *fleet, name, path string, labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	c := f.w.client(t)
	key, err := cluster.CurrentKey(ctx, c)
	require.NoError(t, err)
	sealed, err := seal.Seal(key, data)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	_, err = temporalx.ApplyCluster(ctx, c, protocol.DefaultTaskQueue, name, protocol.ClusterApply{
		Labels: labels, SetLabels: true, KubeconfigHash: hex.EncodeToString(sum[:]), Kubeconfig: &sealed})
	require.NoError(t, err)
}

// dialRecorder is a TCP listener that records whether anyone connected.
type dialRecorder struct {
	addr    string
	dialled atomic.Bool
}

func startDialRecorder(t *testing.T) *dialRecorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	r := &dialRecorder{addr: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			r.dialled.Store(true)
			_ = conn.Close()
		}
	}()
	return r
}
