package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

func meta(name string) api.ObjectMeta { return api.ObjectMeta{Namespace: "team-a", Name: name} }

func restriction(name string, f func(*api.GitRepoRestriction)) api.GitRepoRestriction {
	r := api.GitRepoRestriction{Metadata: meta(name)}
	f(&r)
	return r
}

func pol(name string, f func(*api.Policy)) api.Policy {
	p := api.Policy{Metadata: meta(name)}
	f(&p)
	return p
}

const goodRepo = "https://git.example.com/team-a/app.git"

func TestGitRepo(t *testing.T) {
	base := api.GitRepoSpec{Repo: goodRepo}
	with := func(f func(*api.GitRepoSpec)) api.GitRepoSpec { s := base; f(&s); return s }
	tests := []struct {
		name string
		set  Set
		spec api.GitRepoSpec
		// want is the effective spec when allowed; wantErr the violation.
		want    api.GitRepoSpec
		wantErr string
	}{
		{name: "no documents: the spec as it is", spec: base, want: base},
		{
			name: "restriction: defaultServiceAccount and defaultClientSecretName fill empty fields",
			set: Set{Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
				r.DefaultServiceAccount, r.DefaultClientSecretName = "deployer", "git-creds"
			})}},
			spec: base,
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount, s.ClientSecretName = "deployer", "git-creds" }),
		},
		{
			name: "a set serviceAccount is kept over the default",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.GitRepo = &api.GitRepoPolicy{DefaultServiceAccount: "deployer"}
			})}},
			spec: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "mine" }),
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "mine" }),
		},
		{
			name: "allowedServiceAccounts refuses another",
			set: Set{Policies: []api.Policy{pol("strict", func(p *api.Policy) {
				p.AllowedServiceAccounts = []string{"deployer"}
			})}},
			spec:    with(func(s *api.GitRepoSpec) { s.ServiceAccount = "cluster-admin" }),
			wantErr: `Policy team-a/strict: allowedServiceAccounts [deployer] do not list serviceAccount "cluster-admin"`,
		},
		{
			name: "allowedServiceAccounts accepts a listed one",
			set: Set{Policies: []api.Policy{pol("strict", func(p *api.Policy) {
				p.AllowedServiceAccounts = []string{"deployer"}
			})}},
			spec: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "deployer" }),
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "deployer" }),
		},
		{
			name:    "requireServiceAccount refuses a GitRepo without one",
			set:     Set{Policies: []api.Policy{pol("sa", func(p *api.Policy) { p.RequireServiceAccount = true })}},
			spec:    base,
			wantErr: "Policy team-a/sa: requireServiceAccount is set, and the GitRepo has no serviceAccount (none set, no default)",
		},
		{
			name: "requireServiceAccount is met by a default (checked after defaulting)",
			set: Set{Policies: []api.Policy{pol("sa", func(p *api.Policy) {
				p.RequireServiceAccount = true
				p.GitRepo = &api.GitRepoPolicy{DefaultServiceAccount: "deployer"}
			})}},
			spec: base,
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "deployer" }),
		},
		{
			name: "policy repo patterns are anchored: a prefix elsewhere does not match",
			set: Set{Policies: []api.Policy{pol("strict", func(p *api.Policy) {
				p.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{`https://git\.example\.com/.*`}}
			})}},
			spec:    with(func(s *api.GitRepoSpec) { s.Repo = "https://evil.example/?https://git.example.com/x" }),
			wantErr: `Policy team-a/strict: gitRepo.allowedRepoPatterns [https://git\.example\.com/.*] do not match repo "https://evil.example/?https://git.example.com/x"`,
		},
		{
			name: "policy repo pattern matches the whole URL",
			set: Set{Policies: []api.Policy{pol("strict", func(p *api.Policy) {
				p.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{`https://git\.example\.com/.*`}}
			})}},
			spec: base, want: base,
		},
		{
			name: "restriction repo patterns are unanchored, as in Fleet",
			set: Set{Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
				r.AllowedRepoPatterns = []string{`git\.example\.com/team-a`}
			})}},
			spec: base, want: base,
		},
		{
			name: "a pattern equal to the repo matches verbatim",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{"https://git.example.com/team-a/app.git"}}
			})}},
			spec: base, want: base,
		},
		{
			name: "a restriction and a policy: the repo passes either list",
			set: Set{
				Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
					r.AllowedRepoPatterns = []string{"^https://other/"}
				})},
				Policies: []api.Policy{pol("p", func(p *api.Policy) {
					p.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{`https://git\.example\.com/.*`}}
				})},
			},
			spec: base, want: base,
		},
		{
			name: "a restriction and a policy both refusing: the violation names both",
			set: Set{
				Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
					r.AllowedRepoPatterns = []string{"^https://other/"}
				})},
				Policies: []api.Policy{pol("p", func(p *api.Policy) {
					p.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{"https://third/.*"}}
				})},
			},
			spec: base,
			wantErr: "GitRepoRestriction team-a/r: allowedRepoPatterns; Policy team-a/p: gitRepo.allowedRepoPatterns " +
				`[^https://other/ https://third/.*] do not match repo "https://git.example.com/team-a/app.git"`,
		},
		{
			name: "allowedClientSecretNames refuses another",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.GitRepo = &api.GitRepoPolicy{AllowedClientSecretNames: []string{"team-a-git"}}
			})}},
			spec:    with(func(s *api.GitRepoSpec) { s.ClientSecretName = "platform-git" }),
			wantErr: `Policy team-a/p: gitRepo.allowedClientSecretNames [team-a-git] do not list clientSecretName "platform-git"`,
		},
		{
			name: "allowedTargetNamespaces requires a targetNamespace",
			set: Set{Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
				r.AllowedTargetNamespaces = []string{"apps"}
			})}},
			spec:    base,
			wantErr: "GitRepoRestriction team-a/r: allowedTargetNamespaces is set, and the GitRepo sets no targetNamespace",
		},
		{
			name: "allowedTargetNamespaces refuses another",
			set: Set{Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
				r.AllowedTargetNamespaces = []string{"apps"}
			})}},
			spec:    with(func(s *api.GitRepoSpec) { s.TargetNamespace = "kube-system" }),
			wantErr: `GitRepoRestriction team-a/r: allowedTargetNamespaces [apps] do not list targetNamespace "kube-system"`,
		},
		{
			name: "several policies: allowed lists are a union, the first default by name wins",
			set: Set{Policies: []api.Policy{
				pol("b", func(p *api.Policy) {
					p.AllowedServiceAccounts = []string{"sa-b"}
					p.GitRepo = &api.GitRepoPolicy{DefaultServiceAccount: "sa-b"}
				}),
				pol("a", func(p *api.Policy) {
					p.AllowedServiceAccounts = []string{"sa-a"}
					p.GitRepo = &api.GitRepoPolicy{DefaultServiceAccount: "sa-a"}
				}),
			}},
			spec: base,
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "sa-a" }),
		},
		{
			name: "several policies: a service account of either is allowed",
			set: Set{Policies: []api.Policy{
				pol("b", func(p *api.Policy) { p.AllowedServiceAccounts = []string{"sa-b"} }),
				pol("a", func(p *api.Policy) { p.AllowedServiceAccounts = []string{"sa-a"} }),
			}},
			spec: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "sa-b" }),
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "sa-b" }),
		},
		{
			name: "a restriction's default wins over a policy's",
			set: Set{
				Restrictions: []api.GitRepoRestriction{restriction("z", func(r *api.GitRepoRestriction) { r.DefaultServiceAccount = "from-grr" })},
				Policies: []api.Policy{pol("a", func(p *api.Policy) {
					p.GitRepo = &api.GitRepoPolicy{DefaultServiceAccount: "from-policy"}
				})},
			},
			spec: base,
			want: with(func(s *api.GitRepoSpec) { s.ServiceAccount = "from-grr" }),
		},
		{
			name: "a pattern that does not compile matches nothing",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{"("}}
			})}},
			spec:    base,
			wantErr: `Policy team-a/p: gitRepo.allowedRepoPatterns [(] do not match repo "https://git.example.com/team-a/app.git"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.set.GitRepo(tt.spec)
			if tt.wantErr != "" {
				require.NotNil(t, d.Violation)
				assert.Equal(t, tt.wantErr, d.Violation.Error())
				assert.Equal(t, outcome.Refused, d.Violation.Class)
				return
			}
			require.Nil(t, d.Violation)
			assert.Equal(t, tt.want, d.Spec)
		})
	}
}

func helmOp(t *testing.T, spec string) api.HelmOp {
	t.Helper()
	var h api.HelmOp
	require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"namespace":"team-a","name":"h"},"spec":`+spec+`}`), &h))
	return h
}

func TestHelmOp(t *testing.T) {
	const repoChart = `{"helm":{"repo":"https://charts.team-a.example.com/stable","chart":"app","version":"1.0.0"}}`
	tests := []struct {
		name    string
		set     Set
		spec    string
		wantSA  string
		wantSec string
		wantErr string
	}{
		{name: "no documents", spec: repoChart},
		{name: "no documents: the bundle's serviceAccount stays the bundle's",
			spec: `{"serviceAccount":"mine","helm":{"repo":"https://r.example","chart":"app"}}`},
		{
			name: "under a policy, the bundle's serviceAccount binds the HelmOp",
			set:  Set{Policies: []api.Policy{pol("p", func(p *api.Policy) { p.AllowedServiceAccounts = []string{"mine"} })}},
			spec: `{"serviceAccount":"mine","helm":{"repo":"https://r.example","chart":"app"}}`, wantSA: "mine",
		},
		{
			name: "helmOp defaults fill the serviceAccount and helmSecretName",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.HelmOp = &api.HelmOpPolicy{DefaultServiceAccount: "deployer", DefaultHelmSecretName: "charts"}
			})}},
			spec: repoChart, wantSA: "deployer", wantSec: "charts",
		},
		{
			name: "restrictions do not apply to HelmOps",
			set: Set{Restrictions: []api.GitRepoRestriction{restriction("r", func(r *api.GitRepoRestriction) {
				r.AllowedServiceAccounts = []string{"other"}
				r.DefaultServiceAccount = "grr-default"
			})}},
			spec: `{"serviceAccount":"mine","helm":{"repo":"https://r.example","chart":"app"}}`,
		},
		{
			name:    "requireServiceAccount",
			set:     Set{Policies: []api.Policy{pol("sa", func(p *api.Policy) { p.RequireServiceAccount = true })}},
			spec:    repoChart,
			wantErr: "Policy team-a/sa: requireServiceAccount is set, and the HelmOp has no serviceAccount (none set, no default)",
		},
		{
			name: "allowedServiceAccounts checks the defaulted serviceAccount",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.AllowedServiceAccounts = []string{"deployer"}
				p.HelmOp = &api.HelmOpPolicy{DefaultServiceAccount: "other"}
			})}},
			spec:    repoChart,
			wantErr: `Policy team-a/p: allowedServiceAccounts [deployer] do not list serviceAccount "other"`,
		},
		{
			name: "allowedHelmSecretNames",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.HelmOp = &api.HelmOpPolicy{AllowedHelmSecretNames: []string{"charts"}}
			})}},
			spec:    `{"helmSecretName":"platform","helm":{"repo":"https://r.example","chart":"app"}}`,
			wantErr: `Policy team-a/p: helmOp.allowedHelmSecretNames [charts] do not list helmSecretName "platform"`,
		},
		{
			name: "allowedHelmRepoPatterns refuses another repository (anchored)",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.HelmOp = &api.HelmOpPolicy{AllowedHelmRepoPatterns: []string{`https://charts\.team-a\.example\.com/.*`}}
			})}},
			spec:    `{"helm":{"repo":"https://evil.example/https://charts.team-a.example.com/x","chart":"app"}}`,
			wantErr: `Policy team-a/p: helmOp.allowedHelmRepoPatterns [https://charts\.team-a\.example\.com/.*] do not match helm.repo "https://evil.example/https://charts.team-a.example.com/x"`,
		},
		{
			name: "allowedHelmRepoPatterns accepts a matching repository",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.HelmOp = &api.HelmOpPolicy{AllowedHelmRepoPatterns: []string{`https://charts\.team-a\.example\.com/.*`}}
			})}},
			spec: repoChart,
		},
		{
			name: "allowedHelmRepoPatterns refuses a chart without helm.repo",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.HelmOp = &api.HelmOpPolicy{AllowedHelmRepoPatterns: []string{`https://charts\.team-a\.example\.com/.*`}}
			})}},
			spec:    `{"helm":{"chart":"oci://evil.example/app"}}`,
			wantErr: `Policy team-a/p: helmOp.allowedHelmRepoPatterns [https://charts\.team-a\.example\.com/.*]: the HelmOp sets no helm.repo (chart "oci://evil.example/app")`,
		},
		{
			name: "allowedChartPatterns",
			set: Set{Policies: []api.Policy{pol("p", func(p *api.Policy) {
				p.HelmOp = &api.HelmOpPolicy{AllowedChartPatterns: []string{"app|web"}}
			})}},
			spec:    `{"helm":{"repo":"https://r.example","chart":"apps"}}`,
			wantErr: `Policy team-a/p: helmOp.allowedChartPatterns [app|web] do not match helm.chart "apps"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := helmOp(t, tt.spec)
			d := tt.set.HelmOp(h)
			if tt.wantErr != "" {
				require.NotNil(t, d.Violation)
				assert.Equal(t, tt.wantErr, d.Violation.Error())
				return
			}
			require.Nil(t, d.Violation)
			want := h.AsGitRepo().Spec
			want.ServiceAccount, want.HelmSecretName = tt.wantSA, tt.wantSec
			if tt.wantSec == "" {
				want.HelmSecretName = h.Spec.HelmSecretName
			}
			assert.Equal(t, want, d.Spec)
		})
	}
}

func TestAllowNamespaceCreationIsNoted(t *testing.T) {
	set := Set{Policies: []api.Policy{pol("ns", func(p *api.Policy) { p.RequireServiceAccount, p.AllowNamespaceCreation = true, true })}}
	d := set.GitRepo(api.GitRepoSpec{Repo: goodRepo, ServiceAccount: "deployer"})
	require.Nil(t, d.Violation)
	require.Len(t, d.Notes, 1)
	assert.Contains(t, d.Notes[0], "Policy team-a/ns: allowNamespaceCreation is not supported")
	assert.Empty(t, Set{Policies: []api.Policy{pol("ns", func(p *api.Policy) { p.RequireServiceAccount = true })}}.
		GitRepo(api.GitRepoSpec{Repo: goodRepo, ServiceAccount: "deployer"}).Notes,
		"false is what deploys as a serviceAccount do: nothing to note")
}
