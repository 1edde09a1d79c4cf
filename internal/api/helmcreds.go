package api

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// ErrHelmRepoURLRegexRequired marks a GitRepo that names helmSecretName
// or helmSecretNameForPaths without helmRepoURLRegex: its credentials
// would go to any chart URL a fleet.yaml names, so they go to none (Fleet
// 0.16 requires the regex for both, fleet#5141). The error returned names
// the field.
var ErrHelmRepoURLRegexRequired = errors.New("helmRepoURLRegex is required")

// regexRequiredError is ErrHelmRepoURLRegexRequired for one field.
type regexRequiredError struct{ field string }

func (e regexRequiredError) Error() string {
	return e.field + " requires helmRepoURLRegex: set it to the chart URLs that may receive the credentials"
}

func (e regexRequiredError) Is(target error) bool { return target == ErrHelmRepoURLRegexRequired }

// HelmRepoURLPattern returns the pattern a chart URL must match, as a
// whole, to receive s.HelmSecretName's or s.HelmSecretNameForPaths'
// credentials: s.HelmRepoURLRegex anchored at both ends (^(?:re)$), so
// "https://good.example/.*" does not match
// "https://evil.example/?https://good.example/x". It returns nil without
// either Secret, and an error wrapping ErrHelmRepoURLRegexRequired when a
// GitRepo names one without a regex. A HelmOp's GitRepo (s.HelmOp set)
// may omit the regex: the HelmOp names its chart's URL itself, so its
// author chooses where the credentials go; with one, the regex applies.
func HelmRepoURLPattern(s GitRepoSpec) (*regexp.Regexp, error) {
	switch {
	case s.HelmSecretName == "" && s.HelmSecretNameForPaths == "" && s.HelmRepoURLRegex == "":
		return nil, nil
	case s.HelmRepoURLRegex == "" && s.HelmOp != nil:
		return nil, nil
	case s.HelmRepoURLRegex == "" && s.HelmSecretNameForPaths != "":
		return nil, regexRequiredError{"helmSecretNameForPaths"}
	case s.HelmRepoURLRegex == "":
		return nil, regexRequiredError{"helmSecretName"}
	}
	return regexp.Compile("^(?:" + s.HelmRepoURLRegex + ")$")
}

// HelmPathCredentialsKey is the key of a helmSecretNameForPaths Secret
// that holds the credentials by path, as in Fleet (the file gitjob mounts
// as /etc/fleet/helm/secrets-path.yaml).
const HelmPathCredentialsKey = "secrets-path.yaml"

// HelmCredentials are the Helm repository credentials of one entry of a
// helmSecretNameForPaths Secret, in Fleet's format (bundlereader.Auth).
type HelmCredentials struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// CABundle is PEM certificates trusted, besides the system's, by the
	// chart repository's TLS connections.
	CABundle []byte `json:"caBundle,omitempty"`
	// InsecureSkipVerify turns off TLS verification of the repository.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// BasicHTTP talks to an OCI registry over plain HTTP.
	BasicHTTP bool `json:"basicHTTP,omitempty"`
	// SSHPrivateKey and SSHKnownHosts are read, as Fleet reads them, for
	// charts in Git repositories; Flotilla does not use them.
	SSHPrivateKey []byte `json:"sshPrivateKey,omitempty"`
	SSHKnownHosts []byte `json:"sshKnownHosts,omitempty"`
}

// HelmPathCredentials maps bundle directories (paths relative to the
// repository root, or path.Match globs) to Helm credentials: the content
// of a helmSecretNameForPaths Secret's secrets-path.yaml.
type HelmPathCredentials map[string]HelmCredentials

// ErrHelmPathCredentials marks a secrets-path.yaml that cannot be used.
var ErrHelmPathCredentials = errors.New("invalid Helm credentials by path")

// ParseHelmPathCredentials decodes secrets-path.yaml: a YAML mapping of
// bundle path (or glob) to credentials. Keys are cleaned ("./app/" is
// "app"); a glob that is malformed, or two keys that clean to the same
// path, are errors. Errors wrap ErrHelmPathCredentials and name keys and
// fields, never values.
func ParseHelmPathCredentials(data []byte) (HelmPathCredentials, error) {
	var raw map[string]HelmCredentials
	if err := yaml.Unmarshal(data, &raw); err != nil {
		// yaml's messages name lines and Go types, not the content.
		return nil, fmt.Errorf("%w: %w", ErrHelmPathCredentials, err)
	}
	out := make(HelmPathCredentials, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		p := path.Clean(strings.TrimPrefix(k, "/"))
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%w: path %q: %w", ErrHelmPathCredentials, k, err)
		}
		if _, dup := out[p]; dup {
			return nil, fmt.Errorf("%w: path %q is given twice", ErrHelmPathCredentials, p)
		}
		out[p] = raw[k]
	}
	return out, nil
}

// For returns the entry for the bundle directory dir (slash-separated,
// relative to the repository root, "." for the root) as Fleet's fleet
// apply picks it: the entry whose key is dir itself, else the first key,
// in lexical order, that matches dir as a glob. It returns the key with
// the credentials, or ok false when no entry applies (the bundle then
// gets no credentials).
func (c HelmPathCredentials) For(dir string) (key string, creds HelmCredentials, ok bool) {
	if creds, ok := c[dir]; ok {
		return dir, creds, true
	}
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if m, _ := path.Match(k, dir); m {
			return k, c[k], true
		}
	}
	return "", HelmCredentials{}, false
}
