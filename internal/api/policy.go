package api

import (
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kinds of Fleet's namespace restrictions and registration tokens.
const (
	KindGitRepoRestriction       = "GitRepoRestriction"
	KindPolicy                   = "Policy"
	KindClusterRegistrationToken = "ClusterRegistrationToken"
)

// GitRepoRestriction is Fleet's GitRepoRestriction: limits and defaults
// for the GitRepos of its namespace. Its fields sit at the top level of
// the document, as in Fleet (there is no spec). internal/policy enforces
// it together with the namespace's Policies.
type GitRepoRestriction struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`

	// DefaultServiceAccount is the serviceAccount of a GitRepo that sets none.
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// AllowedServiceAccounts, when not empty, lists the service accounts
	// GitRepos may name.
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowedRepoPatterns, when not empty, are regular expressions one of
	// which must match a GitRepo's whole repo URL.
	AllowedRepoPatterns []string `json:"allowedRepoPatterns,omitempty"`
	// DefaultClientSecretName is the clientSecretName of a GitRepo that sets none.
	DefaultClientSecretName string `json:"defaultClientSecretName,omitempty"`
	// AllowedClientSecretNames, when not empty, lists the client secrets
	// GitRepos may name.
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
	// AllowedTargetNamespaces, when not empty, lists the targetNamespace
	// values GitRepos may set; a GitRepo must then set one.
	AllowedTargetNamespaces []string `json:"allowedTargetNamespaces,omitempty"`
}

// Policy is Fleet 0.16's Policy: restrictions and defaults for the
// GitRepos and HelmOps of its namespace. Several Policies of a namespace
// are combined as Fleet combines them (by name; allowed lists are a union).
// Like GitRepoRestriction, its fields sit at the top level.
type Policy struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`

	// RequireServiceAccount refuses a GitRepo or HelmOp whose
	// serviceAccount is empty once defaults are applied.
	RequireServiceAccount bool `json:"requireServiceAccount,omitempty"`
	// AllowedServiceAccounts, when not empty, lists the service accounts
	// GitRepos and HelmOps may name.
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowNamespaceCreation lets deploys create namespaces on clusters
	// when RequireServiceAccount is set (they may not otherwise).
	AllowNamespaceCreation bool `json:"allowNamespaceCreation,omitempty"`
	// GitRepo holds what applies to GitRepos only.
	GitRepo *GitRepoPolicy `json:"gitRepo,omitempty"`
	// HelmOp holds what applies to HelmOps only.
	HelmOp *HelmOpPolicy `json:"helmOp,omitempty"`
}

// GitRepoPolicy is Policy.gitRepo.
type GitRepoPolicy struct {
	DefaultServiceAccount    string   `json:"defaultServiceAccount,omitempty"`
	DefaultClientSecretName  string   `json:"defaultClientSecretName,omitempty"`
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
	AllowedRepoPatterns      []string `json:"allowedRepoPatterns,omitempty"`
}

// HelmOpPolicy is Policy.helmOp.
type HelmOpPolicy struct {
	DefaultServiceAccount   string   `json:"defaultServiceAccount,omitempty"`
	DefaultHelmSecretName   string   `json:"defaultHelmSecretName,omitempty"`
	AllowedHelmSecretNames  []string `json:"allowedHelmSecretNames,omitempty"`
	AllowedHelmRepoPatterns []string `json:"allowedHelmRepoPatterns,omitempty"`
	AllowedChartPatterns    []string `json:"allowedChartPatterns,omitempty"`
}

// ClusterRegistrationToken is Fleet's ClusterRegistrationToken: a
// registration token for agents, valid for TTL (0: until deleted). Only
// the Kubernetes-native mode reads it; the token itself is written to a
// Secret named in its status, never to the resource.
type ClusterRegistrationToken struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta                   `json:"metadata"`
	Spec     ClusterRegistrationTokenSpec `json:"spec,omitempty"`
}

// ClusterRegistrationTokenSpec is the token's lifetime.
type ClusterRegistrationTokenSpec struct {
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// Default fills in the namespace.
func (r *GitRepoRestriction) Default() {
	if r.Metadata.Namespace == "" {
		r.Metadata.Namespace = DefaultNamespace
	}
}

// Validate checks the name and that every pattern compiles.
func (r *GitRepoRestriction) Validate() error {
	errs := validateMeta(r.Metadata, true, field.NewPath("metadata"))
	errs = append(errs, patterns(field.NewPath("allowedRepoPatterns"), r.AllowedRepoPatterns)...)
	return invalid(KindGitRepoRestriction, r.Metadata.Namespace+"/"+r.Metadata.Name, errs)
}

// Default fills in the namespace.
func (p *Policy) Default() {
	if p.Metadata.Namespace == "" {
		p.Metadata.Namespace = DefaultNamespace
	}
}

// Validate checks the name and that every pattern compiles.
func (p *Policy) Validate() error {
	errs := validateMeta(p.Metadata, true, field.NewPath("metadata"))
	if g := p.GitRepo; g != nil {
		errs = append(errs, patterns(field.NewPath("gitRepo", "allowedRepoPatterns"), g.AllowedRepoPatterns)...)
	}
	if h := p.HelmOp; h != nil {
		errs = append(errs, patterns(field.NewPath("helmOp", "allowedHelmRepoPatterns"), h.AllowedHelmRepoPatterns)...)
		errs = append(errs, patterns(field.NewPath("helmOp", "allowedChartPatterns"), h.AllowedChartPatterns)...)
	}
	return invalid(KindPolicy, p.Metadata.Namespace+"/"+p.Metadata.Name, errs)
}

// patterns checks each regular expression compiles.
func patterns(p *field.Path, list []string) field.ErrorList {
	var errs field.ErrorList
	for i, s := range list {
		if _, err := regexp.Compile(s); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), s, fmt.Sprintf("not a regular expression: %v", err)))
		}
	}
	return errs
}
