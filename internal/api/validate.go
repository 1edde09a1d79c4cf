package api

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidationError is a resource that failed validation; its message names
// the resource and every offending field.
type ValidationError struct {
	Kind, Name string
	Errs       field.ErrorList
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = fe.Error()
	}
	return fmt.Sprintf("invalid %s %s: %s", e.Kind, e.Name, strings.Join(msgs, "; "))
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Kind: kind, Name: name, Errs: errs}
}

// Default fills in the GitRepo's defaults: namespace, paths and targets.
// Branch stays empty (meaning the remote HEAD) and polling is resolved by
// GitRepoSpec.Polling, so the stored spec is what the user wrote.
func (g *GitRepo) Default() {
	if g.Metadata.Namespace == "" {
		g.Metadata.Namespace = DefaultNamespace
	}
	if g.APIVersion == "" {
		g.APIVersion, g.Kind = Version, KindGitRepo
	}
}

// EffectivePaths returns the scanned paths (default ".").
func (s GitRepoSpec) EffectivePaths() []string {
	if len(s.Paths) == 0 {
		return []string{DefaultPath}
	}
	return s.Paths
}

// DefaultTarget is the target of a GitRepo that names none, and of a
// bundle without targets rendered without a GitRepo: the cluster group
// "default".
var DefaultTarget = TargetSelector{Name: "default", ClusterGroup: DefaultClusterGroup}

// EffectiveTargets returns the targets (default DefaultTarget).
func (s GitRepoSpec) EffectiveTargets() []TargetSelector {
	if len(s.Targets) == 0 {
		return []TargetSelector{DefaultTarget}
	}
	return s.Targets
}

// Validate checks the GitRepo; the error names every bad field.
func (g *GitRepo) Validate() error {
	var errs field.ErrorList
	errs = append(errs, validateMeta(g.Metadata, true, field.NewPath("metadata"))...)
	errs = append(errs, g.Spec.validate(field.NewPath("spec"))...)
	return invalid(KindGitRepo, g.Metadata.Namespace+"/"+g.Metadata.Name, errs)
}

func (s GitRepoSpec) validate(p *field.Path) field.ErrorList {
	errs := s.validateSource(p)
	if s.HelmOp != nil {
		errs = append(errs, field.Forbidden(p.Child("helmOp"), "set by Flotilla for a HelmOp; apply a HelmOp document instead"))
	}
	for i, pt := range s.Paths {
		errs = append(errs, validatePath(p.Child("paths").Index(i), pt)...)
	}
	for i, t := range s.Targets {
		errs = append(errs, t.validate(p.Child("targets").Index(i))...)
	}
	if s.TargetNamespace != "" {
		errs = append(errs, dnsLabel(p.Child("targetNamespace"), s.TargetNamespace)...)
	}
	for _, ref := range []struct{ name, value string }{
		{"webhookSecret", s.WebhookSecret}, {"clientSecretName", s.ClientSecretName}, {"helmSecretName", s.HelmSecretName},
		{"serviceAccount", s.ServiceAccount}, {"helmSecretNameForPaths", s.HelmSecretNameForPaths},
	} {
		if ref.value != "" {
			errs = append(errs, dnsSubdomain(p.Child(ref.name), ref.value)...)
		}
	}
	switch _, err := HelmRepoURLPattern(s); {
	case errors.Is(err, ErrHelmRepoURLRegexRequired):
		errs = append(errs, field.Required(p.Child("helmRepoURLRegex"), err.Error()))
	case err != nil:
		errs = append(errs, field.Invalid(p.Child("helmRepoURLRegex"), s.HelmRepoURLRegex, err.Error()))
	}
	if s.PollingInterval != nil && s.PollingInterval.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("pollingInterval"), s.PollingInterval.Duration.String(), "must not be negative"))
	}
	if s.ForceSyncGeneration < 0 {
		errs = append(errs, field.Invalid(p.Child("forceSyncGeneration"), s.ForceSyncGeneration, "must not be negative"))
	}
	for i, b := range s.Bundles {
		bp := p.Child("bundles").Index(i)
		errs = append(errs, validatePath(bp.Child("base"), b.Base)...)
		errs = append(errs, validateOptionsPath(bp.Child("options"), b)...)
	}
	errs = append(errs, s.Verify.validate(p.Child("verify"))...)
	errs = append(errs, s.Previews.validate(p.Child("previews"))...)
	return errs
}

// validateSource checks the repository URL, branch and revision.
func (s GitRepoSpec) validateSource(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateRepoURL(p.Child("repo"), s.Repo)...)
	errs = append(errs, validateCABundle(p.Child("caBundle"), s.CABundle)...)
	if s.Branch != "" && !validRef(s.Branch) {
		errs = append(errs, field.Invalid(p.Child("branch"), s.Branch, "not a valid Git branch name"))
	}
	if s.Revision != "" && !validRef(s.Revision) {
		errs = append(errs, field.Invalid(p.Child("revision"), s.Revision, "not a valid Git revision"))
	}
	return errs
}

// validateRepoURL checks a GitRepo's repo: http(s), ssh (ssh://,
// git+ssh://, ssh+git://) or scp-like (git@host:org/repo.git), with a
// host and no password; a user name is fine for SSH only, where it is the
// login and no secret.
func validateRepoURL(p *field.Path, repo string) field.ErrorList {
	noCreds := field.Invalid(p, RedactURL(repo), "credentials in the URL are not allowed; use clientSecretName")
	if repo == "" {
		return field.ErrorList{field.Required(p, "the Git repository URL")}
	}
	if IsSSHURL(repo) && !strings.Contains(repo, "://") {
		user, hostPath := "", repo
		if at := strings.Index(repo, "@"); at >= 0 && strings.Contains(repo[at:], ":") {
			user, hostPath = repo[:at], repo[at+1:]
		}
		host, rest, _ := strings.Cut(hostPath, ":")
		switch {
		case strings.Contains(user, ":"):
			return field.ErrorList{noCreds}
		case host == "" || rest == "":
			return field.ErrorList{field.Invalid(p, RedactURL(repo), "an scp-like URL needs a host and a path (git@host:org/repo.git)")}
		}
		return nil
	}
	u, err := url.Parse(repo)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(p, RedactURL(repo), "not a URL")}
	case u.Scheme != "http" && u.Scheme != "https" && !IsSSHURL(repo):
		return field.ErrorList{field.NotSupported(p, u.Scheme, []string{"http", "https", "ssh", "git+ssh"})}
	case u.Host == "":
		return field.ErrorList{field.Invalid(p, RedactURL(repo), "the URL has no host")}
	case u.User == nil:
		return nil
	}
	if _, hasPassword := u.User.Password(); hasPassword || !IsSSHURL(repo) {
		return field.ErrorList{noCreds}
	}
	return nil
}

// validate checks the mode and the Secret of a verification.
func (v *VerifySpec) validate(p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	switch v.Mode {
	case "", VerifyHEAD, VerifyTag, VerifyTagAndHEAD:
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), v.Mode, []string{VerifyHEAD, VerifyTag, VerifyTagAndHEAD}))
	}
	if v.SecretRef == nil || v.SecretRef.Name == "" {
		errs = append(errs, field.Required(p.Child("secretRef", "name"), "the Secret holding the trusted public keys"))
	} else {
		errs = append(errs, dnsSubdomain(p.Child("secretRef", "name"), v.SecretRef.Name)...)
	}
	return errs
}

// EffectiveMode is Mode with its default (HEAD).
func (v *VerifySpec) EffectiveMode() string {
	if v == nil || v.Mode == "" {
		return VerifyHEAD
	}
	return v.Mode
}

// validatePath checks one of a GitRepo's scan paths.
func validatePath(pp *field.Path, pt string) field.ErrorList {
	switch {
	case pt == "":
		return field.ErrorList{field.Invalid(pp, pt, "must not be empty")}
	case path.IsAbs(pt) || strings.HasPrefix(pt, "/"):
		return field.ErrorList{field.Invalid(pp, pt, "must be relative to the repository root")}
	case hasDotDot(pt):
		return field.ErrorList{field.Invalid(pp, pt, "must not leave the repository ('..')")}
	}
	if _, err := path.Match(pt, ""); err != nil {
		return field.ErrorList{field.Invalid(pp, pt, "bad glob: "+err.Error())}
	}
	return nil
}

// validateOptionsPath checks a bundles entry's options file: relative to
// its base, and, as in Fleet, free to leave the base ("../dev.yaml") but
// not the repository.
func validateOptionsPath(pp *field.Path, b BundlePath) field.ErrorList {
	switch joined := path.Join(b.Base, b.Options); {
	case b.Options == "":
		return nil
	case path.IsAbs(b.Options):
		return field.ErrorList{field.Invalid(pp, b.Options, "must be relative to the bundle's base")}
	case joined == ".." || strings.HasPrefix(joined, "../") || joined == b.Base:
		return field.ErrorList{field.Invalid(pp, b.Options, "must name a file inside the repository")}
	}
	return nil
}

func (t TargetSelector) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.ClusterName != "" {
		errs = append(errs, dnsLabel(p.Child("clusterName"), t.ClusterName)...)
	}
	if t.ClusterGroup != "" {
		errs = append(errs, dnsSubdomain(p.Child("clusterGroup"), t.ClusterGroup)...)
	}
	errs = append(errs, selector(p.Child("clusterSelector"), t.ClusterSelector)...)
	errs = append(errs, selector(p.Child("clusterGroupSelector"), t.ClusterGroupSelector)...)
	return errs
}

// Validate checks the Cluster's name, labels and agent settings.
func (c *Cluster) Validate() error {
	errs := ValidateClusterMeta(c.Metadata)
	p := field.NewPath("spec")
	if c.Spec.AgentNamespace != "" {
		errs = append(errs, dnsLabel(p.Child("agentNamespace"), c.Spec.AgentNamespace)...)
	}
	for i, e := range c.Spec.AgentEnvVars {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(p.Child("agentEnvVars").Index(i).Child("name"), e.Name, msg))
		}
	}
	errs = append(errs, ValidateTolerations(c.Spec.AgentTolerations, p.Child("agentTolerations"))...)
	return invalid(KindCluster, c.Metadata.Name, errs)
}

// ValidateTolerations checks tolerations as the API server would: a
// qualified key (required with Equal), a known operator and effect, no
// value with Exists, and tolerationSeconds only with NoExecute.
func ValidateTolerations(tols []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tols {
		tp := p.Index(i)
		if t.Key != "" {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
			}
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if t.Key == "" {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator, "operator must be Exists when key is empty"))
			}
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, "value must be empty when operator is Exists"))
			}
		default:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect, "effect must be NoExecute when tolerationSeconds is set"))
		}
	}
	return errs
}

// ValidateClusterMeta checks a cluster's name (a DNS-1123 label: it becomes
// part of workflow IDs and task queues) and labels.
func ValidateClusterMeta(m ObjectMeta) field.ErrorList {
	p := field.NewPath("metadata")
	errs := dnsLabel(p.Child("name"), m.Name)
	errs = append(errs, ValidateLabels(m.Labels, p.Child("labels"))...)
	return errs
}

// Validate checks the ClusterGroup's name and selector.
func (g *ClusterGroup) Validate() error {
	errs := validateMeta(g.Metadata, false, field.NewPath("metadata"))
	errs = append(errs, selector(field.NewPath("spec", "selector"), g.Spec.Selector)...)
	if g.Spec.Selector == nil {
		errs = append(errs, field.Required(field.NewPath("spec", "selector"), "a label selector ({} selects every cluster)"))
	}
	return invalid(KindClusterGroup, g.Metadata.Name, errs)
}

// Validate checks the Secret's name and keys. Any type and any keys are
// accepted: a Secret may hold Git or Helm credentials, webhook keys, or
// anything a bundle copies to its clusters (downstreamResources).
func (s *Secret) Validate() error {
	errs := validateMeta(s.Metadata, true, field.NewPath("metadata"))
	errs = append(errs, validateDataKeys(s.Data, field.NewPath("data"))...)
	errs = append(errs, validateDataKeys(s.StringData, field.NewPath("stringData"))...)
	return invalid(KindSecret, s.Metadata.Namespace+"/"+s.Metadata.Name, errs)
}

// ValidateCredentials checks the Secret carries Git credentials or webhook
// keys: what the file store of older versions kept.
func (s *Secret) ValidateCredentials() error {
	if s.value("password") == "" && s.value("token") == "" && len(s.WebhookKeys()) == 0 {
		return invalid(KindSecret, s.Metadata.Namespace+"/"+s.Metadata.Name, field.ErrorList{field.Required(field.NewPath("data"),
			"a basic-auth secret needs \"password\" (with \"username\") or \"token\"; a webhook secret one of "+strings.Join(WebhookSecretKeys, ", "))})
	}
	return nil
}

// AllData returns the Secret's data with stringData merged in (stringData
// wins, as in Kubernetes).
func (s *Secret) AllData() map[string][]byte {
	out := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = v
	}
	for k, v := range s.StringData {
		out[k] = []byte(v)
	}
	return out
}

// WebhookSecretKeys are the keys of a webhook Secret (Fleet's names): one
// per provider, and a username and password for Azure DevOps.
var WebhookSecretKeys = []string{"github", "gitlab", "gitea", "gogs", "bitbucket", "bitbucket-server", "azure-username", "azure-password"}

// WebhookKeys returns the secret's webhook keys that are set.
func (s *Secret) WebhookKeys() map[string]string {
	out := map[string]string{}
	for _, k := range WebhookSecretKeys {
		if v := s.value(k); v != "" {
			out[k] = v
		}
	}
	return out
}

func (s *Secret) value(k string) string {
	if v, ok := s.StringData[k]; ok {
		return v
	}
	return string(s.Data[k])
}

// Credentials returns the secret's username and password (a "token" is a
// password with username "git" unless one is given).
func (s *Secret) Credentials() (username, password string) {
	username, password = s.value("username"), s.value("password")
	if password == "" {
		password = s.value("token")
		if username == "" {
			username = "git"
		}
	}
	return username, password
}

// ValidateLabels checks label keys and values with apimachinery's rules.
// Keys are checked in sorted order and every error names its key
// (metadata.labels[env]), so messages are stable and precise.
func ValidateLabels(labels map[string]string, p *field.Path) field.ErrorList {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, "key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(p.Key(k), labels[k], msg))
		}
	}
	return errs
}

func validateMeta(m ObjectMeta, namespaced bool, p *field.Path) field.ErrorList {
	errs := dnsSubdomain(p.Child("name"), m.Name)
	if len(m.Name) > 63 {
		errs = append(errs, field.TooLong(p.Child("name"), m.Name, 63))
	}
	if namespaced && m.Namespace != "" {
		errs = append(errs, dnsLabel(p.Child("namespace"), m.Namespace)...)
	}
	errs = append(errs, ValidateLabels(m.Labels, p.Child("labels"))...)
	return errs
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	return dnsName(p, v, validation.IsDNS1123Label)
}

func dnsSubdomain(p *field.Path, v string) field.ErrorList {
	return dnsName(p, v, validation.IsDNS1123Subdomain)
}

func dnsName(p *field.Path, v string, check func(string) []string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range check(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func selector(p *field.Path, s *metav1.LabelSelector) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, p)
	if len(errs) == 0 {
		if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
			errs = append(errs, field.Invalid(p, s.String(), err.Error()))
		}
	}
	return errs
}

func validRef(ref string) bool {
	if strings.ContainsAny(ref, " ~^:?*[\\") || strings.Contains(ref, "..") || strings.HasPrefix(ref, "-") {
		return false
	}
	return !strings.HasSuffix(ref, ".lock") && !strings.HasSuffix(ref, "/") && !strings.HasPrefix(ref, "/")
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
