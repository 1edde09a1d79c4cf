package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/githubapp"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// Keys of a Git credentials Secret, as Fleet names them.
const (
	keySSHPrivateKey     = "ssh-privatekey" // corev1.SSHAuthPrivateKey
	keyKnownHosts        = "known_hosts"
	keyPassword          = "password" // with ssh-privatekey: its passphrase (Flux's reading)
	keyGitHubAppID       = "github_app_id"
	keyGitHubAppInstall  = "github_app_installation_id"
	keyGitHubAppKey      = "github_app_private_key"
	secretTypeSSHAuth    = "kubernetes.io/ssh-auth"
	githubAppGitUsername = "x-access-token"
)

// gitSecret is a clientSecretName Secret read as one of the credential
// forms: exactly one field is set.
type gitSecret struct {
	basic *gitsource.Auth
	ssh   *gitsource.SSHAuth
	app   *githubapp.App
}

// parseGitSecret reads a Secret's data as Git credentials, as Fleet does:
// an ssh-privatekey (or type kubernetes.io/ssh-auth) is an SSH key, with
// the Secret's known_hosts and, for an encrypted key, its passphrase in
// password (as Flux reads it); any of the github_app_* keys is a GitHub App
// (all three required); anything else is basic auth, a password with no
// username being a token sent as the username (Fleet's reading), and
// Flotilla's token key a password for user "git". Errors name the key, never
// a value.
func parseGitSecret(typ string, data map[string][]byte) (gitSecret, error) {
	switch {
	case len(data[keySSHPrivateKey]) > 0 || typ == secretTypeSSHAuth:
		if len(data[keySSHPrivateKey]) == 0 {
			return gitSecret{}, fmt.Errorf("an ssh-auth secret needs %q", keySSHPrivateKey)
		}
		return gitSecret{ssh: &gitsource.SSHAuth{PrivateKey: data[keySSHPrivateKey], KnownHosts: data[keyKnownHosts],
			Passphrase: data[keyPassword]}}, nil
	case len(data[keyGitHubAppID]) > 0 || len(data[keyGitHubAppInstall]) > 0 || len(data[keyGitHubAppKey]) > 0:
		return parseGitHubApp(data)
	}
	s := api.Secret{Data: data}
	user, pass := s.Credentials()
	if pass == "" {
		return gitSecret{}, errors.New(`a basic-auth secret needs "password" (with or without "username") or "token"`)
	}
	if len(data["username"]) == 0 && len(data["password"]) > 0 {
		user, pass = pass, "" // Fleet: a token alone is the username
	}
	return gitSecret{basic: &gitsource.Auth{Username: user, Password: pass}}, nil
}

// parseGitHubApp reads the three keys of a GitHub App Secret. The IDs may
// carry surrounding whitespace (a file's trailing newline).
func parseGitHubApp(data map[string][]byte) (gitSecret, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(string(data[keyGitHubAppID])), 10, 64)
	if err != nil || id <= 0 {
		return gitSecret{}, fmt.Errorf("a GitHub App secret needs %s, a positive number", keyGitHubAppID)
	}
	inst, err := strconv.ParseInt(strings.TrimSpace(string(data[keyGitHubAppInstall])), 10, 64)
	if err != nil || inst <= 0 {
		return gitSecret{}, fmt.Errorf("a GitHub App secret needs %s, a positive number", keyGitHubAppInstall)
	}
	if len(data[keyGitHubAppKey]) == 0 {
		return gitSecret{}, fmt.Errorf("a GitHub App secret needs %s (the App's PEM private key)", keyGitHubAppKey)
	}
	return gitSecret{app: &githubapp.App{ID: id, InstallationID: inst, PrivateKey: data[keyGitHubAppKey]}}, nil
}

// remote builds the Git remote of a GitRepo with its credentials: basic
// auth, an SSH key checked against known_hosts (the Secret's, else the
// worker's --ssh-known-hosts), or a GitHub App's installation token,
// minted here and never returned. warnings are for the GitRepo's status.
func (a *Activities) remote(ctx context.Context, ref GitRepoRef, spec api.GitRepoSpec) (gitsource.Remote, []string, error) {
	r := gitsource.Remote{URL: spec.Repo, InsecureSkipTLSVerify: spec.InsecureSkipTLSVerify, CABundle: spec.CABundle}
	if gitsource.IsSSH(spec.Repo) {
		r.SSH = &gitsource.SSHAuth{}
	}
	if spec.ClientSecretName != "" {
		if err := a.withCredentials(ctx, ref, spec, &r); err != nil {
			return r, nil, err
		}
	}
	if r.SSH == nil {
		return r, unusedHTTPSettings(spec, r), nil
	}
	warnings := unusedSSHSettings(spec, r)
	if len(r.SSH.KnownHosts) == 0 && a.KnownHostsFile != "" {
		kh, err := os.ReadFile(a.KnownHostsFile)
		if err != nil {
			return r, nil, fmt.Errorf("%s: read --ssh-known-hosts: %w", ref.Title(), err)
		}
		r.SSH.KnownHosts = kh
	}
	if spec.InsecureSkipHostKeyChecks || a.InsecureSkipHostKeyChecks {
		r.SSH.InsecureIgnoreHostKey = true
		warnings = append(warnings, fmt.Sprintf("the host key of %s is not checked (insecureSkipHostKeyChecks): "+
			"anyone between Flotilla and the host can serve any commit", r))
	}
	return r, warnings, nil
}

// unusedHTTPSettings warns of the GitRepo's SSH-only settings on an
// http(s) repository, where they have no effect (the worker's
// --insecure-skip-host-key-checks is for every GitRepo and not named).
func unusedHTTPSettings(spec api.GitRepoSpec, r gitsource.Remote) []string {
	if !spec.InsecureSkipHostKeyChecks {
		return nil
	}
	return []string{fmt.Sprintf("insecureSkipHostKeyChecks has no effect on %s: "+
		"host keys are checked only for SSH repositories", r)}
}

// unusedSSHSettings warns of the GitRepo's TLS settings on an SSH
// repository: they are for https Git and the GitHub App API, and a GitHub
// App Secret is refused with an SSH repository.
func unusedSSHSettings(spec api.GitRepoSpec, r gitsource.Remote) []string {
	var out []string
	if len(spec.CABundle) > 0 {
		out = append(out, fmt.Sprintf("caBundle is not used for %s: "+
			"it is only for https repositories and the GitHub App API", r))
	}
	if spec.InsecureSkipTLSVerify {
		out = append(out, fmt.Sprintf("insecureSkipTLSVerify has no effect on %s: "+
			"it is only for https repositories and the GitHub App API", r))
	}
	return out
}

// withCredentials sets r's credentials from the clientSecretName Secret,
// refusing a form that does not fit the URL's scheme.
func (a *Activities) withCredentials(ctx context.Context, ref GitRepoRef, spec api.GitRepoSpec, r *gitsource.Remote) error {
	sec, err := a.gitSecret(ctx, ref, spec.ClientSecretName)
	if err != nil {
		return err
	}
	ssh := r.SSH != nil
	switch {
	case sec.ssh != nil && !ssh:
		return invalidSecret(ref, spec.ClientSecretName, "holds an SSH key, but repo is not an ssh:// or scp-like URL")
	case sec.ssh != nil:
		r.SSH = sec.ssh
	case ssh:
		return invalidSecret(ref, spec.ClientSecretName, "repo is an SSH URL: the secret needs "+keySSHPrivateKey)
	case sec.app != nil:
		app := *sec.app
		app.APIURL, app.CABundle, app.InsecureSkipTLSVerify = githubapp.APIURL(spec.Repo), spec.CABundle, spec.InsecureSkipTLSVerify
		token, err := a.githubApps().Token(ctx, app)
		if err != nil {
			return githubAppError(ref, spec.ClientSecretName, err)
		}
		r.Auth = &gitsource.Auth{Username: githubAppGitUsername, Password: token}
	default:
		r.Auth = sec.basic
	}
	return nil
}

// gitSecret loads and reads the clientSecretName Secret.
func (a *Activities) gitSecret(ctx context.Context, ref GitRepoRef, name string) (gitSecret, error) {
	typ, data, err := a.Secrets.SecretData(ctx, ref.Namespace, name)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		return gitSecret{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: clientSecretName %q: no such secret in namespace %s (apply a v1 Secret with `flotilla apply`)",
				ref.Title(), name, ref.Namespace), ErrTypeSecretNotFound, nil)
	case errors.Is(err, cluster.ErrNoData):
		// Sealed by an older version, which kept only the credentials.
		user, pass, lerr := a.Secrets.Load(ref.Namespace, name)
		if lerr != nil {
			return gitSecret{}, fmt.Errorf("%s: read secret %s: %w", ref.Title(), name, lerr)
		}
		return gitSecret{basic: &gitsource.Auth{Username: user, Password: pass}}, nil
	case err != nil:
		return gitSecret{}, fmt.Errorf("%s: read secret %s: %w", ref.Title(), name, err)
	}
	sec, err := parseGitSecret(typ, data)
	if err != nil {
		return gitSecret{}, invalidSecret(ref, name, err.Error())
	}
	return sec, nil
}

func invalidSecret(ref GitRepoRef, name, why string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: clientSecretName %q: %s", ref.Title(), name, why),
		ErrTypeSecretNotFound, nil)
}

// githubAppError classifies a failure to mint a token: a key that is not
// one is an invalid Secret, a refused App ErrTypeGitAuth (both
// non-retryable); anything else (5xx, rate limits, transport) is tried
// again. githubapp's errors never carry the key, the JWT or a token.
func githubAppError(ref GitRepoRef, secret string, err error) error {
	msg := fmt.Sprintf("%s: GitHub App of clientSecretName %q: %v", ref.Title(), secret, err)
	var rl *gitsource.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return gitError(ref, err)
	case errors.Is(err, githubapp.ErrInvalidKey):
		return invalidSecret(ref, secret, keyGitHubAppKey+" is not a PEM RSA private key (PKCS#1 or PKCS#8)")
	case errors.Is(err, githubapp.ErrUnauthorized), errors.Is(err, githubapp.ErrInvalidApp):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeGitAuth, nil)
	case gitsource.UntrustedCertificate(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", msg, gitsource.ErrTLS), ErrTypeGitTLS, nil)
	}
	return temporal.NewApplicationError(msg, "Git")
}

// githubApps returns the controller's token cache, creating it on first
// use.
func (a *Activities) githubApps() *githubapp.Tokens {
	a.appsOnce.Do(func() {
		if a.GitHubApps == nil {
			a.GitHubApps = githubapp.NewTokens(githubapp.Options{Limiter: apiLimiter{gitsource.DefaultHostLimiter}})
		}
	})
	return a.GitHubApps
}

// apiLimiter holds GitHub App token requests to the controller's per-host
// backoff, as Git requests are: an API host that answered 429 (or ran out
// of rate limit) is not asked again before the time it gave, by any
// GitRepo.
type apiLimiter struct{ l *gitsource.HostLimiter }

func (a apiLimiter) Check(host string) error { return a.l.Check(host) }

func (a apiLimiter) Observe(host string, status int, h http.Header) error {
	if rl := a.l.Observe(host, status, h); rl != nil {
		return rl
	}
	return nil
}
