package tests

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/history"
)

const (
	ghAppID      = 31337
	ghInstallID  = 4711
	ghTokenOnly  = "glpat-t0ken-only-5d1e"
	ghAppPrefix  = "/app.git/"
	ghTokenPrefx = "/token.git/"
)

// fakeGitHubApp is one https server standing in for a GitHub Enterprise
// host: /api/v3/app/installations/<id>/access_tokens mints a token for a
// JWT signed by the App's key, and the Git repositories accept only that
// token (app.git) or a token sent as the username (token.git).
type fakeGitHubApp struct {
	pub *rsa.PublicKey

	mu     sync.Mutex
	tokens []string // minted, newest last
	jwts   []string
}

func (g *fakeGitHubApp) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/v3/") {
			next.ServeHTTP(w, r)
			return
		}
		signed := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		_, err := jwt.Parse(signed, func(*jwt.Token) (any, error) { return g.pub, nil },
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(fmt.Sprint(ghAppID)), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
		if r.Method != http.MethodPost || r.URL.Path != fmt.Sprintf("/api/v3/app/installations/%d/access_tokens", ghInstallID) || err != nil {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		g.mu.Lock()
		tok := fmt.Sprintf("ghs_minted%d_%d", len(g.tokens)+1, time.Now().UnixNano())
		g.tokens, g.jwts = append(g.tokens, tok), append(g.jwts, signed)
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": time.Now().Add(time.Hour).UTC()})
	})
}

func (g *fakeGitHubApp) authorize(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	switch {
	case strings.HasPrefix(r.URL.Path, ghAppPrefix):
		g.mu.Lock()
		defer g.mu.Unlock()
		return user == "x-access-token" && len(g.tokens) > 0 && pass == g.tokens[len(g.tokens)-1]
	case strings.HasPrefix(r.URL.Path, ghTokenPrefx):
		return user == ghTokenOnly && pass == "" // Fleet: a password alone is sent as the username
	}
	return false
}

// TestGitHubApp: a GitRepo with a GitHub App Secret deploys from an https
// host trusted through caBundle (the token minted by the controller at
// the host's /api/v3); without caBundle its status says to set it; a
// token-only Secret works on a second GitRepo; no token, JWT or key is in
// any workflow history or the worker log.
func TestGitHubApp(t *testing.T) {
	f := startFleet(t, 1, 1)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	gh := &fakeGitHubApp{pub: &key.PublicKey}
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{TLS: true, Middleware: gh.middleware, Authorize: gh.authorize})
	appRepo := srv.CreateRepo(t, "app", map[string]string{"fleet.yaml": fleetYAML("ghapp-ns"), "cm.yaml": configMapDoc("ghapp", "v1")})
	tokenRepo := srv.CreateRepo(t, "token", map[string]string{"fleet.yaml": fleetYAML("token-ns"), "cm.yaml": configMapDoc("tokenonly", "v1")})
	caBundle := "  caBundle: " + base64.StdEncoding.EncodeToString(srv.CAPEM()) + "\n"

	f.apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: gh-app\nstringData:\n  github_app_id: %q\n  github_app_installation_id: %q\n  github_app_private_key: |\n    %s\n",
		fmt.Sprint(ghAppID), fmt.Sprint(ghInstallID), strings.ReplaceAll(strings.TrimSpace(keyPEM), "\n", "\n    ")))
	f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token-only\ntype: kubernetes.io/basic-auth\nstringData:\n  password: "+ghTokenOnly+"\n")

	t.Run("AppTokenDeploys", func(t *testing.T) {
		f.apply(t, gitRepoDoc("ghapp", appRepo.URL(), selectorTarget("env", "dev")+"  clientSecretName: gh-app\n"+caBundle))
		f.waitFor(t, "ghapp", "deployed with a minted App token", settledAt(appRepo.Head(t), 1))
		got, ok := f.configMap(t, "cluster-1", "ghapp-ns", "ghapp")
		require.True(t, ok)
		assert.Equal(t, "v1", got.Data["value"])
		gh.mu.Lock()
		assert.Len(t, gh.tokens, 1, "one token minted and cached for every check and the checkout")
		gh.mu.Unlock()
	})
	t.Run("NoCABundleNamesIt", func(t *testing.T) {
		f.apply(t, gitRepoDoc("ghapp-untrusted", appRepo.URL(), selectorTarget("env", "dev")+"  clientSecretName: gh-app\n"))
		st := f.waitFor(t, "ghapp-untrusted", "an error about the certificate", func(st status.GitRepo) bool { return st.Error != "" })
		assert.Contains(t, st.Error, "caBundle")
		assert.Contains(t, st.Error, "certificate")
		f.remove(t, "ghapp-untrusted")
	})
	t.Run("TokenOnlySecret", func(t *testing.T) {
		f.apply(t, gitRepoDoc("tokenonly", tokenRepo.URL(), selectorTarget("env", "dev")+"  clientSecretName: token-only\n"+caBundle))
		f.waitFor(t, "tokenonly", "deployed with the token as username", settledAt(tokenRepo.Head(t), 1))
		_, ok := f.configMap(t, "cluster-1", "token-ns", "tokenonly")
		assert.True(t, ok)
	})
	t.Run("SecretsStayOut", func(t *testing.T) {
		gh.mu.Lock()
		secrets := append(append([]string{ghTokenOnly, strings.Split(keyPEM, "\n")[1]}, gh.tokens...), gh.jwts...)
		gh.mu.Unlock()
		assertNotInHistoriesOrLogs(t, f, secrets, 3)
	})
}

// assertNotInHistoriesOrLogs fails if any of secrets is in any workflow
// history of f (every run, every payload decoded: inputs, results, signal
// and update arguments, memo, search attributes, headers and failure
// details) or worker log, or if fewer than minHistories were read.
func assertNotInHistoriesOrLogs(t *testing.T, f *fleet, secrets []string, minHistories int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := f.w.client(t)
	histories := 0
	require.NoError(t, temporalx.EachExecution(ctx, c, "", func(e *commonpb.WorkflowExecution) error {
		text, err := history.RunText(ctx, c, e.GetWorkflowId(), e.GetRunId())
		if err != nil {
			return err
		}
		histories++
		for _, s := range secrets {
			assert.NotContains(t, text, s, "a secret in the history of %s (run %s)", e.GetWorkflowId(), e.GetRunId())
		}
		return nil
	}))
	assert.GreaterOrEqual(t, histories, minHistories, "histories read")
	for _, log := range f.logs {
		b, err := os.ReadFile(log)
		require.NoError(t, err)
		for _, s := range secrets {
			assert.NotContains(t, string(b), s, "a secret in the worker log %s", log)
		}
	}
}
