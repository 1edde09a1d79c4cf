package activities

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
)

// readers returns the bundle reader of each bundle directory of one
// render of a GitRepo. Without helmSecretNameForPaths every bundle gets
// a.reader's (helmSecretName's credentials). With it, as in Fleet,
// helmSecretName is not used: each bundle gets the credentials of its
// entry in the Secret's secrets-path.yaml (api.HelmPathCredentials.For),
// or none, and the username and password go only to chart URLs
// helmRepoURLRegex matches as a whole (a GitRepo without the regex is
// refused before the Secret is read), while the entry's transport
// settings (caBundle, insecureSkipVerify, basicHTTP) apply to every chart
// of the bundle. Bundles of one entry share a chart fetcher.
func (a *Activities) readers(ctx context.Context, ref GitRepoRef, spec api.GitRepoSpec) (func(dir string) bundleReader, error) {
	if spec.HelmSecretNameForPaths == "" || spec.HelmOp != nil {
		r, err := a.reader(ref, spec)
		if err != nil {
			return nil, err
		}
		return func(string) bundleReader { return r }, nil
	}
	if a.Charts == nil {
		r := &bundle.Reader{Limits: a.Limits}
		return func(string) bundleReader { return r }, nil
	}
	re, err := api.HelmRepoURLPattern(spec)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: helmRepoURLRegex: %v", ref.Title(), err), ErrTypeInvalidBundle, nil)
	}
	table, err := a.pathCredentials(ctx, ref, spec.HelmSecretNameForPaths)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	byEntry := map[string]*bundle.Reader{}
	return func(dir string) bundleReader {
		key, creds, ok := table.For(dir)
		mu.Lock()
		defer mu.Unlock()
		if r, seen := byEntry[key]; seen {
			return r
		}
		f := a.Charts.Derive()
		if ok {
			f.Auth = pathAuth(re, creds)
		}
		r := &bundle.Reader{Charts: f, Limits: a.Limits}
		byEntry[key] = r
		if w := unusedSSHCredentials(ref, spec.HelmSecretNameForPaths, key, creds); w != "" {
			// The first bundle of the entry carries the warning, so the
			// GitRepo's status shows it once per render.
			return warningReader{Reader: r, warnings: []string{w}}
		}
		return r
	}, nil
}

// bundleReader reads one bundle: a *bundle.Reader, or a warningReader.
type bundleReader interface {
	ReadLocation(ctx context.Context, root string, loc bundle.Location, repoName string) (bundle.Bundle, bundle.Manifest, error)
}

// warningReader is a bundle.Reader whose bundles carry warnings about
// the GitRepo's settings besides their own.
type warningReader struct {
	*bundle.Reader
	warnings []string
}

func (w warningReader) ReadLocation(ctx context.Context, root string, loc bundle.Location, repoName string) (bundle.Bundle, bundle.Manifest, error) {
	b, m, err := w.Reader.ReadLocation(ctx, root, loc, repoName)
	if err == nil {
		b.Warnings = append(b.Warnings, w.warnings...)
	}
	return b, m, err
}

// unusedSSHCredentials is the warning for a secrets-path.yaml entry
// (key) that sets sshPrivateKey or sshKnownHosts, which Fleet uses for
// charts in Git repositories and Flotilla, which fetches no chart from
// Git, does not use; "" when it sets neither. It names the Secret, the
// entry and the fields, never their content.
func unusedSSHCredentials(ref GitRepoRef, secret, key string, c api.HelmCredentials) string {
	var fields []string
	if len(c.SSHPrivateKey) > 0 {
		fields = append(fields, "sshPrivateKey")
	}
	if len(c.SSHKnownHosts) > 0 {
		fields = append(fields, "sshKnownHosts")
	}
	if len(fields) == 0 {
		return ""
	}
	verb := "is"
	if len(fields) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("helmSecretNameForPaths %s/%s entry %q: %s %s not used: Flotilla fetches charts over HTTP(S) and OCI only",
		ref.Namespace, secret, key, strings.Join(fields, " and "), verb)
}

// pathAuth returns the chart credentials of one secrets-path.yaml entry:
// its transport settings for every URL, its username and password only
// for URLs re matches (as Fleet strips only the credentials).
func pathAuth(re *regexp.Regexp, c api.HelmCredentials) func(url string) *chartfetch.Auth {
	return func(url string) *chartfetch.Auth {
		auth := chartfetch.Auth{CABundle: c.CABundle, InsecureSkipTLSVerify: c.InsecureSkipVerify, PlainHTTP: c.BasicHTTP}
		if re != nil && re.MatchString(url) {
			auth.Username, auth.Password = c.Username, c.Password
		}
		if auth.Username == "" && auth.Password == "" && len(auth.CABundle) == 0 && !auth.InsecureSkipTLSVerify && !auth.PlainHTTP {
			return nil
		}
		return &auth
	}
}

// pathCredentials loads and parses the helmSecretNameForPaths Secret.
// Errors name the Secret and its key, never the content.
func (a *Activities) pathCredentials(ctx context.Context, ref GitRepoRef, name string) (api.HelmPathCredentials, error) {
	invalid := func(why string) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: helmSecretNameForPaths %q: %s", ref.Title(), name, why),
			ErrTypeSecretNotFound, nil)
	}
	_, data, err := a.Secrets.SecretData(ctx, ref.Namespace, name)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		return nil, invalid(fmt.Sprintf("no such secret in namespace %s (apply a v1 Secret with `flotilla apply`)", ref.Namespace))
	case errors.Is(err, cluster.ErrNoData):
		return nil, invalid(err.Error())
	case err != nil:
		return nil, fmt.Errorf("%s: read secret %s: %w", ref.Title(), name, err)
	}
	raw, ok := data[api.HelmPathCredentialsKey]
	if !ok {
		return nil, invalid("has no key " + api.HelmPathCredentialsKey)
	}
	table, err := api.ParseHelmPathCredentials(raw)
	if err != nil {
		return nil, invalid(fmt.Sprintf("key %s: %v", api.HelmPathCredentialsKey, err))
	}
	return table, nil
}
