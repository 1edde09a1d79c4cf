package cluster

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// The kubeconfig fields that are not inline data: each names a command
// to run, a file to read or a proxy to send credentials through.
const (
	fieldExec         = "exec"
	fieldAuthProvider = "auth-provider"
	fieldTokenFile    = "tokenFile"
	fieldClientCert   = "client-certificate"
	fieldClientKey    = "client-key"
	fieldCA           = "certificate-authority"
	fieldProxyURL     = "proxy-url"
)

// KubeconfigError is a kubeconfig that holds fields Flotilla does not
// follow: commands (exec, auth-provider), file paths (tokenFile,
// client-certificate, client-key, certificate-authority) and proxy-url.
// Errs has one entry per field, naming the kubeconfig entry and the field
// (`users[admin].user.exec`) and saying what to embed instead; never a
// value. It matches ErrInvalidKubeconfig with errors.Is.
type KubeconfigError struct {
	// Cluster is the Flotilla cluster the kubeconfig is for.
	Cluster string
	// File is the kubeconfig file, when it was read from one.
	File string
	// Errs are the fields, one each.
	Errs field.ErrorList
	// NoCredentials: a controller dropped the fields and no inline
	// credentials were left to authenticate with.
	NoCredentials bool
}

func (e *KubeconfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %q: ", e.Cluster)
	if e.File != "" {
		fmt.Fprintf(&b, "kubeconfig %s: ", e.File)
	}
	b.WriteString(ErrInvalidKubeconfig.Error())
	if e.NoCredentials {
		b.WriteString(": no inline credentials (token, client-certificate-data and client-key-data, or username and password)" +
			" are left once Flotilla drops the commands, files and proxies it never follows")
	} else {
		b.WriteString(": Flotilla uses only data embedded in a kubeconfig, never commands, files or proxies it names")
	}
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = fe.Error()
	}
	return b.String() + ": " + strings.Join(msgs, "; ")
}

// Unwrap makes a KubeconfigError match ErrInvalidKubeconfig.
func (e *KubeconfigError) Unwrap() error { return ErrInvalidKubeconfig }

// OutcomeClass is the error's failure class: Invalid for a kubeconfig
// refused before it was stored, Unauthorized for a stored one left without
// credentials once its commands, files and proxies were dropped (a new
// kubeconfig is needed, as for credentials the cluster refused).
func (e *KubeconfigError) OutcomeClass() outcome.Class {
	if e.NoCredentials {
		return outcome.Unauthorized
	}
	return outcome.Invalid
}

// CheckKubeconfig parses a kubeconfig and reports, as a *KubeconfigError,
// every field of every cluster and user entry that is not inline data
// (see KubeconfigError). It reads no file and runs nothing. A kubeconfig
// that does not parse is ErrInvalidKubeconfig.
func CheckKubeconfig(data []byte) error {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return parseError("", err)
	}
	if errs := stripConfig(cfg.DeepCopy()); len(errs) > 0 {
		return &KubeconfigError{Errs: errs}
	}
	return nil
}

// SafeRESTConfig builds cluster name's REST client configuration from a
// stored kubeconfig, from its inline data alone: the fields CheckKubeconfig
// reports are dropped before anything reads the kubeconfig, so no command
// runs, no file is read and no proxy is used (the controller's own proxy
// settings apply). ignored lists the dropped fields (entry and field,
// never a value) for the caller to log. When the dropped fields were the
// user's only credentials the result is a *KubeconfigError with
// NoCredentials. Errors never include the content.
func SafeRESTConfig(name string, data []byte) (cfg *rest.Config, ignored []string, err error) {
	parsed, err := clientcmd.Load(data)
	if err != nil {
		return nil, nil, parseError(name, err)
	}
	dropped := stripConfig(parsed)
	for _, fe := range dropped {
		ignored = append(ignored, fe.Field)
	}
	if len(dropped) > 0 && !hasInlineCredentials(parsed) {
		return nil, ignored, &KubeconfigError{Cluster: name, Errs: dropped, NoCredentials: true}
	}
	cfg, err = inlineRESTConfig(parsed)
	if err != nil {
		return nil, ignored, fmt.Errorf("cluster %q: %w: %s", name, ErrInvalidKubeconfig, scrub(err.Error(), configSecrets(parsed)))
	}
	return cfg, ignored, nil
}

// inlineRESTConfig builds the REST configuration of cfg's current context
// with clientcmd, without loading rules or a config file to persist to.
// cfg must hold only inline data (stripConfig): clientcmd then reads no
// file and builds no plugin. The result is checked for that all the same.
func inlineRESTConfig(cfg *clientcmdapi.Config) (*rest.Config, error) {
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("build client configuration: %w", err)
	}
	if refs := restConfigReferences(rc); len(refs) > 0 {
		// Unreachable while stripConfig covers clientcmd's fields; a newer
		// client-go that adds one fails here rather than following it.
		return nil, fmt.Errorf("build client configuration: it names %s", strings.Join(refs, ", "))
	}
	return rc, nil
}

// restConfigReferences lists what in rc is not inline data.
func restConfigReferences(rc *rest.Config) []string {
	var refs []string
	for _, r := range []struct {
		name string
		set  bool
	}{
		{"an exec plugin", rc.ExecProvider != nil},
		{"an auth provider", rc.AuthProvider != nil},
		{"a token file", rc.BearerTokenFile != ""},
		{"a proxy", rc.Proxy != nil},
		{"a certificate file", rc.CertFile != ""},
		{"a key file", rc.KeyFile != ""},
		{"a CA file", rc.CAFile != ""},
	} {
		if r.set {
			refs = append(refs, r.name)
		}
	}
	return refs
}

// stripConfig clears every field of cfg's cluster and user entries that
// is not inline data and returns one Forbidden error per field, in the
// order of the entries' names, each saying what to embed instead.
func stripConfig(cfg *clientcmdapi.Config) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedNames(cfg.Clusters) {
		if c := cfg.Clusters[name]; c != nil {
			p := field.NewPath("clusters").Key(name).Child("cluster")
			errs = append(errs, forbidden(p, stripCluster(c))...)
		}
	}
	for _, name := range sortedNames(cfg.AuthInfos) {
		if u := cfg.AuthInfos[name]; u != nil {
			p := field.NewPath("users").Key(name).Child("user")
			errs = append(errs, forbidden(p, stripUser(u))...)
		}
	}
	return errs
}

// stripCluster clears c's file and proxy fields and returns their names.
func stripCluster(c *clientcmdapi.Cluster) []string {
	var cleared []string
	if c.CertificateAuthority != "" {
		c.CertificateAuthority, cleared = "", append(cleared, fieldCA)
	}
	if c.ProxyURL != "" {
		c.ProxyURL, cleared = "", append(cleared, fieldProxyURL)
	}
	return cleared
}

// stripUser clears u's commands and file fields and returns their names.
func stripUser(u *clientcmdapi.AuthInfo) []string {
	var cleared []string
	if u.Exec != nil {
		u.Exec, cleared = nil, append(cleared, fieldExec)
	}
	if u.AuthProvider != nil {
		u.AuthProvider, cleared = nil, append(cleared, fieldAuthProvider)
	}
	if u.TokenFile != "" {
		u.TokenFile, cleared = "", append(cleared, fieldTokenFile)
	}
	if u.ClientCertificate != "" {
		u.ClientCertificate, cleared = "", append(cleared, fieldClientCert)
	}
	if u.ClientKey != "" {
		u.ClientKey, cleared = "", append(cleared, fieldClientKey)
	}
	return cleared
}

// forbidden is one Forbidden error per field under p.
func forbidden(p *field.Path, fields []string) field.ErrorList {
	errs := make(field.ErrorList, 0, len(fields))
	for _, f := range fields {
		errs = append(errs, field.Forbidden(p.Child(f), embedInstead(f)))
	}
	return errs
}

// embedInstead says why a field is refused and what to write instead.
func embedInstead(f string) string {
	const creds = "embed the credential instead: token, or client-certificate-data and client-key-data"
	switch f {
	case fieldExec:
		return "runs a command; " + creds
	case fieldAuthProvider:
		return "runs an auth provider plugin; " + creds
	case fieldTokenFile:
		return "a file path; embed the token as token"
	case fieldClientCert:
		return "a file path; embed the certificate as client-certificate-data (`kubectl config view --minify --flatten` embeds files)"
	case fieldClientKey:
		return "a file path; embed the key as client-key-data (`kubectl config view --minify --flatten` embeds files)"
	case fieldCA:
		return "a file path; embed the CA as certificate-authority-data (`kubectl config view --minify --flatten` embeds files)"
	case fieldProxyURL:
		return "a kubeconfig cannot choose a proxy; remove it and configure the proxy on the controller (HTTPS_PROXY, NO_PROXY)"
	}
	return "not inline data"
}

// hasInlineCredentials reports whether cfg's current context's user holds
// a credential as data.
func hasInlineCredentials(cfg *clientcmdapi.Config) bool {
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return false
	}
	u := cfg.AuthInfos[ctx.AuthInfo]
	return u != nil && (u.Token != "" || u.Username != "" || u.Password != "" ||
		(len(u.ClientCertificateData) > 0 && len(u.ClientKeyData) > 0))
}

// parseError is the error of a kubeconfig that does not parse.
// client-go's parse errors name fields and positions, not values.
func parseError(name string, err error) error {
	return fmt.Errorf("cluster %q: %w: %w", name, ErrInvalidKubeconfig, err)
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
