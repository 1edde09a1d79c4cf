package api

import (
	"fmt"
	"net/url"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-gitops/flotilla/internal/notify"
)

// KindNotification is Flotilla's Notification: where to tell about the
// events of its namespace. Fleet has no such kind, so it exists only in
// Flotilla's own group (Version, flotilla.dev/v1alpha1).
const KindNotification = "Notification"

// Notification delivers the events of its namespace's GitRepos, HelmOps
// (and, in the default namespace, clusters) that pass its filters to one
// provider (notify.Spec).
type Notification struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     notify.Spec `json:"spec"`
}

// Default fills in the namespace.
func (n *Notification) Default() {
	if n.Metadata.Namespace == "" {
		n.Metadata.Namespace = DefaultNamespace
	}
}

// Validate checks the name, the provider, the address, the event types,
// the severity and the globs; each error names the field.
func (n *Notification) Validate() error {
	s, p := n.Spec, field.NewPath("spec")
	errs := validateMeta(n.Metadata, true, field.NewPath("metadata"))
	if !slices.Contains(notify.Providers, s.Provider) {
		errs = append(errs, field.NotSupported(p.Child("provider"), s.Provider, notify.Providers))
	}
	errs = append(errs, notificationAddress(p, s)...)
	if s.SecretRef != nil {
		errs = append(errs, dnsSubdomain(p.Child("secretRef", "name"), s.SecretRef.Name)...)
	}
	for i, t := range s.EventTypes {
		if !slices.Contains(notify.Types, t) {
			errs = append(errs, field.NotSupported(p.Child("eventTypes").Index(i), t, notify.Types))
		}
	}
	if s.Severity != "" && !slices.Contains(notify.Severities, s.Severity) {
		errs = append(errs, field.NotSupported(p.Child("severity"), s.Severity, notify.Severities))
	}
	errs = append(errs, globs(p.Child("gitRepos"), s.GitRepos)...)
	errs = append(errs, globs(p.Child("bundles"), s.Bundles)...)
	errs = append(errs, globs(p.Child("clusters"), s.Clusters)...)
	return invalid(KindNotification, n.Metadata.Namespace+"/"+n.Metadata.Name, errs)
}

// notificationAddress: a webhook needs an address; slack and msteams
// need one here or in their Secret; any address is an absolute http(s)
// URL without credentials (they belong in the Secret).
func notificationAddress(p *field.Path, s notify.Spec) field.ErrorList {
	fp := p.Child("address")
	switch {
	case s.Address == "" && s.Provider == notify.Webhook:
		return field.ErrorList{field.Required(fp, "the webhook's URL")}
	case s.Address == "" && (s.Provider == notify.Slack || s.Provider == notify.MSTeams) && s.SecretRef == nil:
		return field.ErrorList{field.Required(fp, "the webhook's URL, here or as the \"address\" key of spec.secretRef")}
	case s.Address == "":
		return nil
	}
	u, err := url.Parse(s.Address)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return field.ErrorList{field.Invalid(fp, RedactURL(s.Address), "not an absolute http(s) URL")}
	case u.User != nil:
		return field.ErrorList{field.Invalid(fp, RedactURL(s.Address), "credentials belong in spec.secretRef, not in the URL")}
	}
	return nil
}

func globs(p *field.Path, list []string) field.ErrorList {
	var errs field.ErrorList
	for i, g := range list {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			errs = append(errs, field.Invalid(p.Index(i), g, fmt.Sprintf("not a glob: %v", err)))
		}
	}
	return errs
}
