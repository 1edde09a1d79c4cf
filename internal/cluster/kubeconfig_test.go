package cluster

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// secretPath stands in for any value of a refused field: file paths,
// commands and proxy URLs are never quoted in errors or logs.
const secretPath = "/etc/flotilla/seal-keys/fk-1.key"

// kubeconfigDoc is a one-context kubeconfig whose cluster entry "c" has
// clusterExtra and user entry "u" userExtra (flow-style YAML fields,
// each starting with ", ").
func kubeconfigDoc(clusterExtra, userExtra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"%s}}]
users: [{name: u, user: {%s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
`, clusterExtra, strings.TrimPrefix(userExtra, ", "))
}

var (
	b64       = base64.StdEncoding.EncodeToString
	caData    = ", certificate-authority-data: " + b64([]byte("not-a-real-ca"))
	tokenUser = ", token: " + token
	execUser  = `, exec: {apiVersion: client.authentication.k8s.io/v1, command: "` + secretPath + `", args: ["` + token + `"]}`
	authProv  = `, auth-provider: {name: oidc, config: {client-secret: "` + token + `"}}`
	certData  = ", client-certificate-data: " + b64([]byte("cert")) + ", client-key-data: " + b64([]byte("key"))
)

// kubeconfigCases are kubeconfigs with inline data only (wantFields
// empty) and with each field that is not, alone and together: the table of
// TestCheckKubeconfig and TestSafeRESTConfig and the fuzz target's seeds.
var kubeconfigCases = []struct {
	name string
	doc  string
	// wantFields are the fields refused (CheckKubeconfig) and dropped
	// (SafeRESTConfig), in order.
	wantFields []string
	// wantNoCredentials: once dropped, the user holds no credential.
	wantNoCredentials bool
	// wantInstead are substrings of the refusal: what to embed instead.
	wantInstead []string
}{
	{name: "token and CA data", doc: kubeconfigDoc(caData, tokenUser)},
	{name: "client certificate data", doc: kubeconfigDoc(caData, certData)},
	{name: "basic auth, insecure", doc: kubeconfigDoc(", insecure-skip-tls-verify: true", ", username: admin, password: "+token)},
	{name: "impersonation", doc: kubeconfigDoc(caData, tokenUser+", as: bob, as-groups: [dev]")},
	{
		name: "exec", doc: kubeconfigDoc(caData, execUser),
		wantFields: []string{"users[u].user.exec"}, wantNoCredentials: true,
		wantInstead: []string{"runs a command", "token, or client-certificate-data and client-key-data"},
	},
	{
		name: "exec beside a token", doc: kubeconfigDoc(caData, tokenUser+execUser),
		wantFields: []string{"users[u].user.exec"},
	},
	{
		name: "auth-provider", doc: kubeconfigDoc(caData, authProv),
		wantFields: []string{"users[u].user.auth-provider"}, wantNoCredentials: true,
		wantInstead: []string{"auth provider", "token, or client-certificate-data and client-key-data"},
	},
	{
		name: "tokenFile", doc: kubeconfigDoc(caData, ", tokenFile: "+secretPath),
		wantFields: []string{"users[u].user.tokenFile"}, wantNoCredentials: true,
		wantInstead: []string{"embed the token as token"},
	},
	{
		name: "tokenFile beside a token (client-go would re-read the file)", doc: kubeconfigDoc(caData, tokenUser+", tokenFile: "+secretPath),
		wantFields: []string{"users[u].user.tokenFile"},
	},
	{
		name: "client certificate and key paths", doc: kubeconfigDoc(caData, ", client-certificate: "+secretPath+", client-key: "+secretPath),
		wantFields:        []string{"users[u].user.client-certificate", "users[u].user.client-key"},
		wantNoCredentials: true, wantInstead: []string{"client-certificate-data", "client-key-data"},
	},
	{
		name: "certificate paths beside data", doc: kubeconfigDoc(caData, certData+", client-certificate: "+secretPath+", client-key: "+secretPath),
		wantFields: []string{"users[u].user.client-certificate", "users[u].user.client-key"},
	},
	{
		name: "certificate-authority path", doc: kubeconfigDoc(", certificate-authority: "+secretPath, tokenUser),
		wantFields: []string{"clusters[c].cluster.certificate-authority"}, wantInstead: []string{"certificate-authority-data"},
	},
	{
		name: "proxy-url", doc: kubeconfigDoc(caData+`, proxy-url: "http://user:`+token+`@127.0.0.1:3128"`, tokenUser),
		wantFields: []string{"clusters[c].cluster.proxy-url"}, wantInstead: []string{"configure the proxy on the controller"},
	},
	{
		name: "everything at once",
		doc: kubeconfigDoc(", certificate-authority: "+secretPath+", proxy-url: http://127.0.0.1:3128",
			execUser+authProv+", tokenFile: "+secretPath+", client-certificate: "+secretPath+", client-key: "+secretPath),
		wantFields: []string{"clusters[c].cluster.certificate-authority", "clusters[c].cluster.proxy-url",
			"users[u].user.exec", "users[u].user.auth-provider", "users[u].user.tokenFile",
			"users[u].user.client-certificate", "users[u].user.client-key"},
		wantNoCredentials: true,
	},
}

func TestCheckKubeconfig(t *testing.T) {
	for _, tt := range kubeconfigCases {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckKubeconfig([]byte(tt.doc))
			if len(tt.wantFields) == 0 {
				require.NoError(t, err)
				return
			}
			var ke *KubeconfigError
			require.ErrorAs(t, err, &ke)
			require.ErrorIs(t, err, ErrInvalidKubeconfig)
			assert.Equal(t, outcome.Invalid, ke.OutcomeClass())
			got := make([]string, len(ke.Errs))
			for i, fe := range ke.Errs {
				got[i] = fe.Field
			}
			assert.Equal(t, tt.wantFields, got)
			for _, w := range tt.wantInstead {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), secretPath)
			assert.NotContains(t, err.Error(), token)
		})
	}
}

func TestCheckKubeconfig_Unparsable(t *testing.T) {
	err := CheckKubeconfig([]byte("users: [{name: u, user: {token: [" + token + "]}}]"))
	require.ErrorIs(t, err, ErrInvalidKubeconfig)
	var ke *KubeconfigError
	assert.False(t, errors.As(err, &ke), "a parse error is not a refusal of fields")
	assert.NotContains(t, err.Error(), token)
}

// TestSafeRESTConfig: the REST configuration of a stored kubeconfig holds
// its inline data and nothing else; a kubeconfig with inline data only
// gives what clientcmd gives.
func TestSafeRESTConfig(t *testing.T) {
	for _, tt := range kubeconfigCases {
		t.Run(tt.name, func(t *testing.T) {
			cfg, ignored, err := SafeRESTConfig("edge", []byte(tt.doc))
			assert.Equal(t, tt.wantFields, ignored)
			if tt.wantNoCredentials {
				var ke *KubeconfigError
				require.ErrorAs(t, err, &ke)
				assert.Equal(t, outcome.Unauthorized, ke.OutcomeClass())
				assert.Contains(t, err.Error(), `cluster "edge"`)
				assert.Contains(t, err.Error(), "no inline credentials")
				assert.NotContains(t, err.Error(), secretPath)
				assert.NotContains(t, err.Error(), token)
				return
			}
			require.NoError(t, err)
			assertInlineOnly(t, cfg)
			if len(tt.wantFields) == 0 {
				want, err := clientcmd.RESTConfigFromKubeConfig([]byte(tt.doc))
				require.NoError(t, err)
				assert.Equal(t, want, cfg, "inline data passes unchanged")
				return
			}
			assert.Equal(t, "https://127.0.0.1:6443", cfg.Host)
		})
	}
}

// assertInlineOnly fails unless cfg names no command, file or proxy.
func assertInlineOnly(t *testing.T, cfg *rest.Config) {
	t.Helper()
	assert.Nil(t, cfg.ExecProvider)
	assert.Nil(t, cfg.AuthProvider)
	assert.Nil(t, cfg.AuthConfigPersister)
	assert.Empty(t, cfg.BearerTokenFile)
	assert.Nil(t, cfg.Proxy)
	assert.Empty(t, cfg.CertFile)
	assert.Empty(t, cfg.KeyFile)
	assert.Empty(t, cfg.CAFile)
	assert.Empty(t, restConfigReferences(cfg))
}

// TestSafeRESTConfig_RequestFollowsNothing: a request made with the
// configuration of a kubeconfig that also names an exec plugin, a token
// file and a proxy sends the inline token straight to the server: the
// plugin never runs, the file is never read, the proxy never dialled.
func TestSafeRESTConfig_RequestFollowsNothing(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"major":"1","minor":"99"}`))
	}))
	t.Cleanup(srv.Close)
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	var dialled atomic.Bool
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			dialled.Store(true)
			_ = c.Close()
		}
	}()
	dir := t.TempDir()
	canary, plugin, tokenFile := filepath.Join(dir, "canary"), filepath.Join(dir, "plugin.sh"), filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(plugin, []byte("#!/bin/sh\ntouch "+canary+"\n"), 0o700)) //nolint:gosec // a test plugin
	require.NoError(t, os.WriteFile(tokenFile, []byte("file-token"), 0o600))
	ca := b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: %q, proxy-url: "http://%s", certificate-authority-data: %s}}]
users: [{name: u, user: {token: inline-token, tokenFile: %q, exec: {apiVersion: client.authentication.k8s.io/v1, command: %q}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
`, srv.URL, proxy.Addr(), ca, tokenFile, plugin)

	cfg, ignored, err := SafeRESTConfig("edge", []byte(doc))
	require.NoError(t, err)
	assert.Equal(t, []string{"clusters[c].cluster.proxy-url", "users[u].user.exec", "users[u].user.tokenFile"}, ignored)
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/version", nil)
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "Bearer inline-token", auth.Load())
	assert.NoFileExists(t, canary, "the exec plugin never ran")
	assert.False(t, dialled.Load(), "the proxy was never dialled")
}

// TestVault_WarnsOncePerKubeconfig: the ignored fields are logged once
// per cluster and kubeconfig, by name, never with a value.
func TestVault_WarnsOncePerKubeconfig(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	v := NewVault(nil, nil, zap.New(core))
	doc := []byte(kubeconfigDoc(caData, tokenUser+execUser))
	for range 3 {
		_, ignored, err := SafeRESTConfig("edge", doc)
		require.NoError(t, err)
		v.warnIgnored("edge", doc, ignored)
	}
	require.Equal(t, 1, logs.Len())
	entry := logs.All()[0]
	assert.Equal(t, "edge", entry.ContextMap()["cluster"])
	assert.Equal(t, []any{"users[u].user.exec"}, entry.ContextMap()["fields"])
	assert.NotContains(t, fmt.Sprint(entry.ContextMap()), secretPath)

	changed := []byte(kubeconfigDoc(caData, tokenUser+", tokenFile: "+secretPath))
	_, ignored, err := SafeRESTConfig("edge", changed)
	require.NoError(t, err)
	v.warnIgnored("edge", changed, ignored)
	v.warnIgnored("other", changed, ignored)
	assert.Equal(t, 3, logs.Len(), "a new kubeconfig, and another cluster, are warned about again")
}
