package api

import (
	"net/url"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Git hosts PreviewsSpec.Provider names.
const (
	PreviewProviderGitHub = "github"
	PreviewProviderGitLab = "gitlab"
	PreviewProviderGitea  = "gitea"
)

// PreviewSecretKey is the key of a previews Secret holding the API token.
const PreviewSecretKey = "token"

// PreviewsSpec turns on previews of pull (merge) requests for a GitRepo
// (Flotilla extension): a pull request against the GitRepo's branch is
// planned on every cluster and the plan is posted as a comment and a
// commit status through the Git host's API.
type PreviewsSpec struct {
	// SecretName names a Secret in the GitRepo's namespace whose "token"
	// is the Git host's API token (GitHub: a token with pull-request and
	// commit-status write; GitLab: api scope; Gitea: repository write).
	SecretName string `json:"secretName"`
	// Provider is the Git host's API: github, gitlab or gitea. Default:
	// the provider of the webhook delivery that announced the pull
	// request.
	Provider string `json:"provider,omitempty"`
	// APIURL is the API's base URL. Default: derived from repo
	// (https://api.github.com, https://HOST/api/v3 for GitHub Enterprise,
	// https://HOST/api/v4 for GitLab, https://HOST/api/v1 for Gitea).
	APIURL string `json:"apiURL,omitempty"`
	// Forks previews pull requests whose head comes from a fork too.
	// Off by default: a preview renders the head's bundles with the
	// GitRepo's credentials on every cluster (a dry run, read as the
	// bundles' service account) and posts what it saw where the pull
	// request's author can read it, so a fork's author could template
	// values the clusters hold into a diff.
	Forks bool `json:"forks,omitempty"`
}

// validate checks the Secret's name, the provider and the API URL.
func (v *PreviewsSpec) validate(p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if v.SecretName == "" {
		errs = append(errs, field.Required(p.Child("secretName"), "the Secret holding the Git host's API token (key \"token\")"))
	} else {
		errs = append(errs, dnsSubdomain(p.Child("secretName"), v.SecretName)...)
	}
	switch v.Provider {
	case "", PreviewProviderGitHub, PreviewProviderGitLab, PreviewProviderGitea:
	default:
		errs = append(errs, field.NotSupported(p.Child("provider"), v.Provider,
			[]string{PreviewProviderGitHub, PreviewProviderGitLab, PreviewProviderGitea}))
	}
	if v.APIURL != "" {
		u, err := url.Parse(v.APIURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, field.Invalid(p.Child("apiURL"), RedactURL(v.APIURL), "must be an http(s) URL with a host"))
		case u.User != nil:
			errs = append(errs, field.Invalid(p.Child("apiURL"), RedactURL(v.APIURL), "credentials in the URL are not allowed; use secretName"))
		}
	}
	return errs
}
