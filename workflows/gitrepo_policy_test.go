package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/policy"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// fakePolicies answers CheckPolicy from a Set the test changes, as the
// namespace's PolicyWorkflow would.
type fakePolicies struct {
	mu     sync.Mutex
	set    policy.Set
	checks []activities.CheckPolicyInput
}

// allowPolicies serves CheckPolicy with no restriction or policy: every
// spec rolls out as it is.
func allowPolicies(env *testsuite.TestWorkflowEnvironment) *fakePolicies {
	f := &fakePolicies{}
	ignoreEvents(env) // GitRepos emit events (issue 31)
	var a *activities.Activities
	env.OnActivity(a.CheckPolicy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckPolicyInput) (policy.Decision, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.checks = append(f.checks, in)
			if in.HelmOp != nil {
				return f.set.HelmOp(*in.HelmOp), nil
			}
			return f.set.GitRepo(*in.Spec), nil
		})
	return f
}

func (f *fakePolicies) setPolicies(ps ...api.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = policy.Set{Policies: ps}
}

func TestGitRepoWorkflow_Policy(t *testing.T) {
	env, fleet := gitRepoEnv()
	pols := fleet.policies
	strict := api.Policy{Metadata: api.ObjectMeta{Namespace: "fleet-default", Name: "strict"},
		GitRepo: &api.GitRepoPolicy{AllowedRepoPatterns: []string{`https://git\.example\.com/.*`}}}
	defaults := api.Policy{Metadata: api.ObjectMeta{Namespace: "fleet-default", Name: "defaults"},
		GitRepo: &api.GitRepoPolicy{DefaultServiceAccount: "deployer", AllowedRepoPatterns: []string{`https://git\.example/.*`}}}
	pols.setPolicies(strict)
	var refused, allowed status.GitRepo
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	resolvesAtRefusal := -1
	env.RegisterDelayedCallback(func() {
		refused = queryStatus(t, env)
		fleet.mu.Lock()
		resolvesAtRefusal = fleet.resolves
		fleet.mu.Unlock()
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		pols.setPolicies(defaults)
		env.SignalWorkflow(protocol.SignalPolicyChanged, nil)
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { allowed = queryStatus(t, env) }, 3*time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, 4*time.Minute)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	assert.Equal(t, `Policy fleet-default/strict: gitRepo.allowedRepoPatterns [https://git\.example\.com/.*] do not match repo "https://git.example/app.git"`,
		refused.PolicyViolation)
	assert.Equal(t, status.DisplayPolicyViolation, refused.Display.State)
	stalled, _ := refused.Condition(status.ConditionStalled)
	assert.Equal(t, status.ConditionTrue, stalled.Status)
	assert.Equal(t, status.ReasonPolicyViolation, stalled.Reason)
	assert.Empty(t, refused.Deployments, "nothing deployed while refused")

	assert.Empty(t, allowed.PolicyViolation, "the violation clears with the policy")
	assert.Len(t, allowed.Deployments, 2, "the relaxed policy lets the rollout deploy to both clusters")
	assert.Equal(t, "Ready", allowed.Display.State)

	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	assert.Zero(t, resolvesAtRefusal, "the remote was not asked while refused")
	require.NotEmpty(t, fleet.targetSpecs)
	for _, s := range fleet.targetSpecs {
		assert.Equal(t, "deployer", s.ServiceAccount, "the policy's defaultServiceAccount is what deploys")
	}
}

// A HelmOp is checked as a HelmOp (chart patterns, helmOp defaults), and
// its rollout renders with the policy's defaults.
func TestHelmOpWorkflow_Policy(t *testing.T) {
	env, f, _, renders := helmOpEnv(t)
	meta := api.ObjectMeta{Namespace: "fleet-default", Name: "charts"}
	f.policies.setPolicies(api.Policy{Metadata: meta, HelmOp: &api.HelmOpPolicy{AllowedChartPatterns: []string{"web"}}})
	var refused status.GitRepo
	env.RegisterDelayedCallback(func() { applyHelmOp(t, env, testHelmOp(t, "1.0.0"), nil) }, 0)
	env.RegisterDelayedCallback(func() {
		refused = queryStatus(t, env)
		f.policies.setPolicies(api.Policy{Metadata: meta, HelmOp: &api.HelmOpPolicy{AllowedChartPatterns: []string{"app"},
			DefaultServiceAccount: "deployer", DefaultHelmSecretName: "chart-creds"}})
		env.SignalWorkflow(protocol.SignalPolicyChanged, nil)
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, 2*time.Minute)
	env.ExecuteWorkflow(HelmOpWorkflow, helmOpInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, `Policy fleet-default/charts: helmOp.allowedChartPatterns [web] do not match helm.chart "app"`, refused.PolicyViolation)
	require.NotEmpty(t, *renders, "rendered once allowed")
	for _, r := range *renders {
		assert.Equal(t, "deployer", r.Spec.ServiceAccount)
		assert.Equal(t, "chart-creds", r.Spec.HelmSecretName)
	}
	f.policies.mu.Lock()
	defer f.policies.mu.Unlock()
	require.NotEmpty(t, f.policies.checks)
	assert.NotNil(t, f.policies.checks[0].HelmOp, "checked as a HelmOp")
}
