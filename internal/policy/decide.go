package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Set is every GitRepoRestriction and Policy of one namespace.
type Set struct {
	Restrictions []api.GitRepoRestriction `json:"restrictions,omitempty"`
	Policies     []api.Policy             `json:"policies,omitempty"`
}

// Empty reports whether the namespace has neither restrictions nor
// policies: every spec is then allowed as it is.
func (s Set) Empty() bool { return len(s.Restrictions) == 0 && len(s.Policies) == 0 }

// Decision is what a Set makes of one spec.
type Decision struct {
	// Spec is the spec as it rolls out: the GitRepo's with the defaults
	// applied, or for a HelmOp the GitRepo it rolls out as.
	Spec api.GitRepoSpec `json:"spec"`
	// Violation, when set, refuses the spec: nothing is fetched,
	// rendered or deployed.
	Violation *Violation `json:"violation,omitempty"`
	// Notes are what the policy asks that Flotilla does not do, each
	// naming the document, for the status's warnings.
	Notes []string `json:"notes,omitempty"`
}

// ruled is a value (a default, a list, a flag) gathered from the
// documents that set it, with the rule that names them.
type ruled struct {
	values []string
	from   []string // "<Kind> <ns>/<name>: <field>"
}

func (r *ruled) add(doc, field string, values ...string) {
	if len(values) == 0 || (len(values) == 1 && values[0] == "") {
		return
	}
	r.values = append(r.values, values...)
	r.from = append(r.from, doc+": "+field)
}

// first is the first value gathered (a default: the first non-empty).
func (r ruled) first() string {
	if len(r.values) == 0 {
		return ""
	}
	return r.values[0]
}

func (r ruled) rule() string { return strings.Join(r.from, "; ") }

// merged is a Set combined as Fleet combines it: restrictions first, then
// policies, each sorted by name.
type merged struct {
	defaultSA, defaultClientSecret, defaultHelmSecret  ruled
	helmDefaultSA                                      ruled
	allowedSAs, allowedClientSecrets, targetNamespaces ruled
	// restrictionRepos are matched unanchored (GitRepoRestriction, as
	// Fleet does for compatibility), policyRepos anchored.
	restrictionRepos, policyRepos  ruled
	helmSecrets, helmRepos, charts ruled
	requireSA                      ruled
	notes                          []string
}

func docName(kind string, m api.ObjectMeta) string { return kind + " " + m.Namespace + "/" + m.Name }

func (s Set) merge() merged {
	var m merged
	rs := slices.Clone(s.Restrictions)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Metadata.Name < rs[j].Metadata.Name })
	for _, r := range rs {
		doc := docName(api.KindGitRepoRestriction, r.Metadata)
		m.defaultSA.add(doc, "defaultServiceAccount", r.DefaultServiceAccount)
		m.defaultClientSecret.add(doc, "defaultClientSecretName", r.DefaultClientSecretName)
		m.allowedSAs.add(doc, "allowedServiceAccounts", r.AllowedServiceAccounts...)
		m.allowedClientSecrets.add(doc, "allowedClientSecretNames", r.AllowedClientSecretNames...)
		m.restrictionRepos.add(doc, "allowedRepoPatterns", r.AllowedRepoPatterns...)
		m.targetNamespaces.add(doc, "allowedTargetNamespaces", r.AllowedTargetNamespaces...)
	}
	ps := slices.Clone(s.Policies)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Metadata.Name < ps[j].Metadata.Name })
	for _, p := range ps {
		m.addPolicy(p)
	}
	return m
}

func (m *merged) addPolicy(p api.Policy) {
	doc := docName(api.KindPolicy, p.Metadata)
	if p.RequireServiceAccount {
		m.requireSA.add(doc, "requireServiceAccount", "true")
	}
	if p.AllowNamespaceCreation {
		m.notes = append(m.notes, doc+": allowNamespaceCreation is not supported: a deploy that runs as a "+
			"serviceAccount never creates its namespace, which must exist")
	}
	m.allowedSAs.add(doc, "allowedServiceAccounts", p.AllowedServiceAccounts...)
	if g := p.GitRepo; g != nil {
		m.defaultSA.add(doc, "gitRepo.defaultServiceAccount", g.DefaultServiceAccount)
		m.defaultClientSecret.add(doc, "gitRepo.defaultClientSecretName", g.DefaultClientSecretName)
		m.allowedClientSecrets.add(doc, "gitRepo.allowedClientSecretNames", g.AllowedClientSecretNames...)
		m.policyRepos.add(doc, "gitRepo.allowedRepoPatterns", g.AllowedRepoPatterns...)
	}
	if h := p.HelmOp; h != nil {
		m.helmDefaultSA.add(doc, "helmOp.defaultServiceAccount", h.DefaultServiceAccount)
		m.defaultHelmSecret.add(doc, "helmOp.defaultHelmSecretName", h.DefaultHelmSecretName)
		m.helmSecrets.add(doc, "helmOp.allowedHelmSecretNames", h.AllowedHelmSecretNames...)
		m.helmRepos.add(doc, "helmOp.allowedHelmRepoPatterns", h.AllowedHelmRepoPatterns...)
		m.charts.add(doc, "helmOp.allowedChartPatterns", h.AllowedChartPatterns...)
	}
}

// GitRepo applies the Set to a GitRepo's spec, as Fleet's GitRepo
// reconciler does: targetNamespace (required and listed when a
// restriction lists allowedTargetNamespaces), serviceAccount (defaulted,
// then listed), repo (matching a pattern), clientSecretName (defaulted,
// then listed), and requireServiceAccount after the defaults. A default
// is not checked against the allowed list, as in Fleet.
func (s Set) GitRepo(spec api.GitRepoSpec) Decision {
	if s.Empty() {
		return Decision{Spec: spec}
	}
	m := s.merge()
	d := Decision{Spec: spec, Notes: m.notes}
	switch {
	case len(m.targetNamespaces.values) > 0 && spec.TargetNamespace == "":
		d.Violation = violation(m.targetNamespaces.rule(), "is set, and the GitRepo sets no targetNamespace")
	case !listed(spec.TargetNamespace, m.targetNamespaces):
		d.Violation = notListed(m.targetNamespaces, "targetNamespace", spec.TargetNamespace)
	case !listed(spec.ServiceAccount, m.allowedSAs):
		d.Violation = notListed(m.allowedSAs, "serviceAccount", spec.ServiceAccount)
	}
	if d.Violation != nil {
		return d
	}
	d.Violation = repoAllowed(spec.Repo, m.restrictionRepos, m.policyRepos)
	if d.Violation == nil && !listed(spec.ClientSecretName, m.allowedClientSecrets) {
		d.Violation = notListed(m.allowedClientSecrets, "clientSecretName", spec.ClientSecretName)
	}
	if d.Violation != nil {
		return d
	}
	d.Spec.ServiceAccount = withDefault(spec.ServiceAccount, m.defaultSA)
	d.Spec.ClientSecretName = withDefault(spec.ClientSecretName, m.defaultClientSecret)
	if len(m.requireSA.values) > 0 && d.Spec.ServiceAccount == "" {
		d.Violation = violation(m.requireSA.rule(), "is set, and the GitRepo has no serviceAccount (none set, no default)")
	}
	return d
}

// HelmOp applies the Set's Policies to a HelmOp (restrictions are for
// GitRepos only, as in Fleet): the defaults of helmOp, then
// requireServiceAccount, allowedServiceAccounts, allowedHelmSecretNames,
// and the patterns of spec.helm.repo and spec.helm.chart, matched
// anchored. Unlike Fleet, a HelmOp without helm.repo (an oci:// or
// archive URL chart names its own source) is refused while
// allowedHelmRepoPatterns is set, so the chart cannot go around it. The
// decision's Spec is the GitRepo the HelmOp rolls out as, deploying as the
// effective serviceAccount.
func (s Set) HelmOp(h api.HelmOp) Decision {
	eff := h.AsGitRepo().Spec
	if len(s.Policies) == 0 {
		return Decision{Spec: eff}
	}
	// Bound to it (target.Bounds), no customization deploys as another.
	eff.ServiceAccount = bundleServiceAccount(h.Spec.Bundle)
	m := Set{Policies: s.Policies}.merge()
	d := Decision{Spec: eff, Notes: m.notes}
	d.Spec.ServiceAccount = withDefault(eff.ServiceAccount, m.helmDefaultSA)
	d.Spec.HelmSecretName = withDefault(eff.HelmSecretName, m.defaultHelmSecret)
	chart, repo, _ := h.Spec.Chart()
	switch {
	case len(m.requireSA.values) > 0 && d.Spec.ServiceAccount == "":
		d.Violation = violation(m.requireSA.rule(), "is set, and the HelmOp has no serviceAccount (none set, no default)")
	case !listed(d.Spec.ServiceAccount, m.allowedSAs):
		d.Violation = notListed(m.allowedSAs, "serviceAccount", d.Spec.ServiceAccount)
	case !listed(d.Spec.HelmSecretName, m.helmSecrets):
		d.Violation = notListed(m.helmSecrets, "helmSecretName", d.Spec.HelmSecretName)
	case len(m.helmRepos.values) > 0 && repo == "":
		d.Violation = violation(m.helmRepos.rule(), fmt.Sprintf("%s: the HelmOp sets no helm.repo (chart %q)",
			quoteList(m.helmRepos.values), chart))
	default:
		d.Violation = patternAllowed(m.helmRepos, "helm.repo", repo)
		if d.Violation == nil {
			d.Violation = patternAllowed(m.charts, "helm.chart", chart)
		}
	}
	return d
}

// bundleServiceAccount is the serviceAccount key of a HelmOp's bundle.
func bundleServiceAccount(bundle json.RawMessage) string {
	var b struct {
		ServiceAccount string `json:"serviceAccount"`
	}
	_ = json.Unmarshal(bundle, &b) // api.HelmOp.Validate reports what does not decode
	return b.ServiceAccount
}

func withDefault(v string, def ruled) string {
	if v != "" {
		return v
	}
	return def.first()
}

// listed: an empty value, or an empty list, is allowed.
func listed(v string, allowed ruled) bool {
	return v == "" || len(allowed.values) == 0 || slices.Contains(allowed.values, v)
}

func notListed(allowed ruled, field, v string) *Violation {
	return violation(allowed.rule(), fmt.Sprintf("%s do not list %s %q", quoteList(allowed.values), field, v))
}

// repoAllowed: a repo passes when either list accepts it (restrictions
// unanchored, policies anchored, as Fleet matches them).
func repoAllowed(repo string, restriction, pol ruled) *Violation {
	if repo == "" || (len(restriction.values) == 0 && len(pol.values) == 0) {
		return nil
	}
	if matchAny(repo, restriction.values, false) || matchAny(repo, pol.values, true) {
		return nil
	}
	both := ruled{values: slices.Concat(restriction.values, pol.values), from: slices.Concat(restriction.from, pol.from)}
	return violation(both.rule(), fmt.Sprintf("%s do not match repo %q", quoteList(both.values), repo))
}

// patternAllowed matches v anchored against the patterns, if any.
func patternAllowed(patterns ruled, field, v string) *Violation {
	if v == "" || len(patterns.values) == 0 || matchAny(v, patterns.values, true) {
		return nil
	}
	return violation(patterns.rule(), fmt.Sprintf("%s do not match %s %q", quoteList(patterns.values), field, v))
}

// matchAny reports whether a pattern equals v or matches it (the whole
// of v when anchored). A pattern that does not compile matches nothing:
// api's Validate refuses it at apply, so only a document stored by an
// older version can hold one, and failing closed is the safe side.
func matchAny(v string, patterns []string, anchored bool) bool {
	for _, p := range patterns {
		if p == v {
			return true
		}
		expr := p
		if anchored {
			expr = "^(?:" + p + ")$"
		}
		re, err := regexp.Compile(expr)
		if err == nil && re.MatchString(v) {
			return true
		}
	}
	return false
}

func quoteList(vs []string) string { return "[" + strings.Join(vs, " ") + "]" }
