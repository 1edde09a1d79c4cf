package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// KindHelmOp is Fleet's HelmOp: a chart deployed straight from a Helm
// repository or OCI registry, without Git.
const KindHelmOp = "HelmOp"

// HelmOp deploys one Helm chart from a repository, an OCI registry or a
// chart archive URL to the clusters it targets.
type HelmOp struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     HelmOpSpec `json:"spec"`
}

// HelmOpSpec is Fleet's HelmOpSpec: everything a bundle's spec holds (the
// keys of a fleet.yaml: helm, defaultNamespace, targets,
// targetCustomizations, rolloutStrategy, dependsOn, correctDrift, ...),
// kept as Bundle for internal/bundle to read, plus the fields below.
type HelmOpSpec struct {
	// Bundle is the spec without the HelmOp's own fields: a fleet.yaml,
	// as JSON. internal/bundle decodes and validates it.
	Bundle json.RawMessage `json:"-"`
	// Labels are the bundle's labels (selectable by dependsOn.selector).
	Labels map[string]string `json:"-"`
	// PollingInterval is how often a version constraint is resolved
	// again. Default 15s. An exact version is never polled.
	PollingInterval *metav1.Duration `json:"-"`
	// HelmSecretName names a basic-auth Secret (username/password) applied
	// with `flotilla apply`, sent to the chart's repository or registry.
	HelmSecretName string `json:"-"`
	// InsecureSkipTLSVerify does not verify the repository's certificate.
	InsecureSkipTLSVerify bool `json:"-"`
}

// The keys of a HelmOp's spec that are not bundle keys.
const (
	helmOpLabels          = "labels"
	helmOpPollingInterval = "pollingInterval"
	helmOpHelmSecretName  = "helmSecretName"
	helmOpInsecure        = "insecureSkipTLSVerify"
)

// UnmarshalJSON splits the spec into the HelmOp's own fields and the
// bundle's.
func (s *HelmOpSpec) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*s = HelmOpSpec{}
	own := []struct {
		key string
		v   any
	}{
		{helmOpLabels, &s.Labels}, {helmOpPollingInterval, &s.PollingInterval},
		{helmOpHelmSecretName, &s.HelmSecretName}, {helmOpInsecure, &s.InsecureSkipTLSVerify},
	}
	for _, f := range own {
		v, ok := raw[f.key]
		if !ok {
			continue
		}
		if err := json.Unmarshal(v, f.v); err != nil {
			return fmt.Errorf("spec.%s: %w", f.key, err)
		}
		delete(raw, f.key)
	}
	if raw == nil {
		raw = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(raw) // sorted keys: a stable encoding
	if err != nil {
		return err
	}
	s.Bundle = b
	return nil
}

// MarshalJSON writes the spec back as one object.
func (s HelmOpSpec) MarshalJSON() ([]byte, error) {
	raw := map[string]any{}
	if len(s.Bundle) > 0 {
		if err := json.Unmarshal(s.Bundle, &raw); err != nil {
			return nil, err
		}
	}
	if len(s.Labels) > 0 {
		raw[helmOpLabels] = s.Labels
	}
	if s.PollingInterval != nil {
		raw[helmOpPollingInterval] = s.PollingInterval
	}
	if s.HelmSecretName != "" {
		raw[helmOpHelmSecretName] = s.HelmSecretName
	}
	if s.InsecureSkipTLSVerify {
		raw[helmOpInsecure] = true
	}
	return json.Marshal(raw)
}

// helmOpBundle is the part of a HelmOp's bundle the entity workflow needs:
// where the chart comes from, the targets, and whether it is paused. The
// rest is read by internal/bundle at render time.
type helmOpBundle struct {
	Helm *struct {
		Chart   string `json:"chart"`
		Repo    string `json:"repo"`
		Version string `json:"version"`
	} `json:"helm"`
	Targets []TargetSelector `json:"targets"`
	Paused  bool             `json:"paused"`
}

func (s HelmOpSpec) bundle() helmOpBundle {
	var b helmOpBundle
	_ = json.Unmarshal(s.Bundle, &b) // Validate reports what does not decode
	return b
}

// Chart returns the chart reference: the chart (name, oci:// reference or
// archive URL), the repository and the version or constraint.
func (s HelmOpSpec) Chart() (chart, repo, version string) {
	if h := s.bundle().Helm; h != nil {
		return strings.TrimSpace(h.Chart), strings.TrimSpace(h.Repo), strings.TrimSpace(h.Version)
	}
	return "", "", ""
}

// Source names where the chart comes from, for display: the repository
// and chart, or the reference.
func (s HelmOpSpec) Source() string {
	chart, repo, _ := s.Chart()
	if repo != "" {
		return strings.TrimSuffix(repo, "/") + "/" + chart
	}
	return chart
}

// IsConstraint reports whether version is a semver constraint (polled)
// rather than an exact version (major.minor.patch, optionally with a "v"),
// which is deployed as it is. An empty version means the newest stable
// version, and a partial one such as "1.2" any 1.2.x: both are
// constraints, as chart repositories resolve them. A chart archive URL has
// no version and is never polled.
func IsConstraint(version string) bool {
	if version == "" {
		return true
	}
	_, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v"))
	return err != nil
}

// Polled reports whether the HelmOp's version is resolved again every
// polling interval: a constraint on a repository or registry chart.
func (s HelmOpSpec) Polled() bool {
	chart, repo, version := s.Chart()
	if repo == "" && !strings.HasPrefix(chart, "oci://") {
		return false // an archive URL
	}
	if i := strings.LastIndex(chart, ":"); repo == "" && i > len("oci://") && !strings.Contains(chart[i:], "/") {
		return false // oci://host/chart:tag
	}
	return IsConstraint(version)
}

// Default fills in the namespace.
func (h *HelmOp) Default() {
	if h.Metadata.Namespace == "" {
		h.Metadata.Namespace = DefaultNamespace
	}
	if h.APIVersion == "" {
		h.APIVersion, h.Kind = Version, KindHelmOp
	}
}

// Validate checks what the entity workflow relies on; internal/bundle
// checks the bundle's fields (the options, targets, rollout) as it checks
// a fleet.yaml.
func (h *HelmOp) Validate() error {
	var errs field.ErrorList
	errs = append(errs, validateMeta(h.Metadata, true, field.NewPath("metadata"))...)
	spec := field.NewPath("spec")
	var b helmOpBundle
	if err := json.Unmarshal(h.Spec.Bundle, &b); err != nil {
		errs = append(errs, field.Invalid(spec, "", err.Error()))
	}
	chart, repo, version := h.Spec.Chart()
	helm := spec.Child("helm")
	switch {
	case chart == "":
		errs = append(errs, field.Required(helm.Child("chart"), "a HelmOp deploys a chart: a chart name with helm.repo, an oci:// reference or a chart archive URL"))
	case repo != "":
		if !strings.HasPrefix(repo, "http://") && !strings.HasPrefix(repo, "https://") && !strings.HasPrefix(repo, "oci://") {
			errs = append(errs, field.Invalid(helm.Child("repo"), repo, "must be an http(s):// Helm repository or an oci:// registry"))
		}
		if strings.Contains(chart, "://") {
			errs = append(errs, field.Invalid(helm.Child("chart"), chart, "with helm.repo, the chart is a chart name"))
		}
	case strings.HasPrefix(chart, "oci://"):
	case strings.HasPrefix(chart, "http://") || strings.HasPrefix(chart, "https://"):
		if version != "" {
			errs = append(errs, field.Invalid(helm.Child("version"), version, "a chart archive URL has no version"))
		}
	default:
		errs = append(errs, field.Invalid(helm.Child("chart"), chart, "a HelmOp has no Git repository: name a chart with helm.repo, an oci:// reference or a chart archive URL"))
	}
	if version != "" && IsConstraint(version) {
		if _, err := semver.NewConstraint(version); err != nil {
			errs = append(errs, field.Invalid(helm.Child("version"), version, "not a version or semver constraint: "+err.Error()))
		}
	}
	for i, t := range b.Targets {
		errs = append(errs, t.validate(spec.Child("targets").Index(i))...)
	}
	if p := h.Spec.PollingInterval; p != nil && p.Duration < 0 {
		errs = append(errs, field.Invalid(spec.Child(helmOpPollingInterval), p.Duration.String(), "must not be negative"))
	}
	errs = append(errs, ValidateLabels(h.Spec.Labels, spec.Child(helmOpLabels))...)
	return invalid(KindHelmOp, h.Metadata.Namespace+"/"+h.Metadata.Name, errs)
}

// HelmOpSource is what a HelmOp's rollout renders instead of a Git
// checkout: its bundle (a fleet.yaml) and the bundle's name and labels.
type HelmOpSource struct {
	Name   string            `json:"name"`
	Bundle json.RawMessage   `json:"bundle"`
	Labels map[string]string `json:"labels,omitempty"`
}

// AsGitRepo is the GitRepo a HelmOp rolls out as: no Git (Spec.HelmOp
// holds the bundle), its targets the bundle's targets, polled only for a
// version constraint. The rollout machinery (strategies, drift, status)
// is then the GitRepo's.
func (h HelmOp) AsGitRepo() GitRepo {
	b := h.Spec.bundle()
	return GitRepo{
		TypeMeta: TypeMeta{APIVersion: Version, Kind: KindHelmOp},
		Metadata: h.Metadata,
		Spec: GitRepoSpec{
			Repo:                  h.Spec.Source(),
			Targets:               b.Targets,
			HelmSecretName:        h.Spec.HelmSecretName,
			PollingInterval:       h.Spec.PollingInterval,
			DisablePolling:        !h.Spec.Polled(),
			Paused:                b.Paused,
			InsecureSkipTLSVerify: h.Spec.InsecureSkipTLSVerify,
			HelmOp:                &HelmOpSource{Name: h.Metadata.Name, Bundle: h.Spec.Bundle, Labels: h.Spec.Labels},
		},
	}
}

// Chart returns the bundle's chart reference (see HelmOpSpec.Chart).
func (s HelmOpSource) Chart() (chart, repo, version string) {
	return HelmOpSpec{Bundle: s.Bundle}.Chart()
}
