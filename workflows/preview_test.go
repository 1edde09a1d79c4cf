package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// previewRig runs a PreviewWorkflow with the Git host's activities and
// the PlanWorkflow faked; it records every report in order.
type previewRig struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	mu          sync.Mutex
	reports     []string // "status <sha> <state> <desc>", "comment <id-in> -> <id-out>"
	bodies      []string
	plans       []plan.Request
	planTime    time.Duration            // how long a plan takes
	planErr     error                    // what the plan fails with
	result      func(string) plan.Result // the plan of a commit
	failComment error
}

func newPreviewRig(t *testing.T) *previewRig {
	var suite testsuite.WorkflowTestSuite
	r := &previewRig{t: t, env: suite.NewTestWorkflowEnvironment(), planTime: time.Second}
	r.result = func(string) plan.Result {
		return plan.Result{GitRepo: "ns/app", Clusters: []plan.Cluster{
			{Name: "a", Releases: []plan.Release{{Bundle: "web", Action: plan.Upgrade}}},
			{Name: "b", Releases: []plan.Release{{Bundle: "db", Action: plan.Install}}}}}
	}
	r.env.RegisterWorkflow(PreviewWorkflow)
	r.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, req plan.Request) (plan.Result, error) {
		r.mu.Lock()
		r.plans = append(r.plans, req)
		d, err := r.planTime, r.planErr
		r.mu.Unlock()
		if err := workflow.Sleep(ctx, d); err != nil {
			return plan.Result{}, err
		}
		if err != nil {
			return plan.Result{}, err
		}
		res := r.result(req.Commit)
		res.Commit, res.Source = req.Commit, req.Source
		return res, nil
	}, workflow.RegisterOptions{Name: plan.WorkflowName})
	a := &activities.Activities{}
	r.env.RegisterActivity(a)
	r.env.OnActivity(a.PreviewStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PreviewStatusInput) error {
		assert.Equal(t, "gh-api", in.Target.SecretName)
		assert.Equal(t, "flotilla/plan/app", in.Target.Context())
		r.record(fmt.Sprintf("status %s %s %s", in.Commit[:1], in.State, in.Description))
		return nil
	})
	r.env.OnActivity(a.PreviewComment, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PreviewCommentInput) (int64, error) {
		assert.Equal(t, "<!-- flotilla-preview ns/app -->", in.Target.Marker())
		assert.Equal(t, "github", in.Target.Provider, "the webhook's provider when spec.previews names none")
		if r.failComment != nil {
			return 0, r.failComment
		}
		out := in.CommentID
		if out == 0 {
			out = 77
		}
		r.record(fmt.Sprintf("comment %d -> %d", in.CommentID, out))
		r.mu.Lock()
		r.bodies = append(r.bodies, in.Body)
		r.mu.Unlock()
		return out, nil
	})
	return r
}

func (r *previewRig) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, s)
}

// signal sends a pull request event at time at.
func (r *previewRig) signal(at time.Duration, action, commit string) {
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(protocol.SignalPreview, protocol.PreviewHead{Action: action, Commit: commit, Ref: "refs/pull/7/head",
			Provider: "github", RepoURL: "https://github.com/acme/app", Previews: api.PreviewsSpec{SecretName: "gh-api"}})
	}, at)
}

func (r *previewRig) run() protocol.PreviewState {
	r.env.ExecuteWorkflow(PreviewWorkflow, protocol.PreviewStart{Namespace: "ns", Name: "app", Number: 7})
	require.True(r.t, r.env.IsWorkflowCompleted())
	require.NoError(r.t, r.env.GetWorkflowError())
	var s protocol.PreviewState
	require.NoError(r.t, r.env.GetWorkflowResult(&s))
	return s
}

func sha(c byte) string {
	b := make([]byte, 40)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func TestPreviewWorkflow_UpdatesOneCommentPerHead(t *testing.T) {
	r := newPreviewRig(t)
	r.signal(0, protocol.PreviewOpen, sha('a'))
	r.signal(time.Minute, protocol.PreviewUpdate, sha('b'))
	r.signal(2*time.Minute, protocol.PreviewUpdate, sha('b')) // an edit that did not move the head
	r.signal(3*time.Minute, protocol.PreviewClose, "")
	s := r.run()

	assert.Equal(t, []string{
		"status a pending planning…", "comment 0 -> 77", "status a success 2 clusters: 1 upgrade, 1 install",
		"status b pending planning…", "comment 77 -> 77", "status b success 2 clusters: 1 upgrade, 1 install",
	}, r.reports, "the second head updates the comment the first created")
	require.Len(t, r.plans, 2)
	assert.Equal(t, plan.Request{Namespace: "ns", Name: "app", Commit: sha('b'), Ref: "refs/pull/7/head", Source: "pull request #7"}, r.plans[1])
	assert.Contains(t, r.bodies[0], "### Flotilla plan for `ns/app` at `aaaaaaaaaaaa` (pull request #7)")
	assert.Equal(t, protocol.PreviewState{CommentID: 77, Planned: sha('b'), Summary: "2 clusters: 1 upgrade, 1 install", Plans: 2,
		Config: protocol.PreviewHead{Provider: "github", RepoURL: "https://github.com/acme/app", Previews: api.PreviewsSpec{SecretName: "gh-api"}}}, s)
}

func TestPreviewWorkflow_CoalescesHeads(t *testing.T) {
	r := newPreviewRig(t)
	r.planTime = 5 * time.Minute
	r.signal(0, protocol.PreviewOpen, sha('a'))
	r.signal(time.Minute, protocol.PreviewUpdate, sha('b'))
	r.signal(2*time.Minute, protocol.PreviewUpdate, sha('c'))
	r.signal(20*time.Minute, protocol.PreviewClose, "")
	r.run()
	require.Len(t, r.plans, 2)
	assert.Equal(t, sha('a'), r.plans[0].Commit)
	assert.Equal(t, sha('c'), r.plans[1].Commit, "heads arriving during a plan: only the newest is planned")
}

func TestPreviewWorkflow_Failures(t *testing.T) {
	t.Run("a release failing to plan fails the status", func(t *testing.T) {
		r := newPreviewRig(t)
		r.result = func(string) plan.Result {
			return plan.Result{Clusters: []plan.Cluster{{Name: "a", Offline: true, Releases: []plan.Release{{Bundle: "web", Action: plan.Upgrade, Error: "template: bad"}}}}}
		}
		r.signal(0, protocol.PreviewOpen, sha('a'))
		r.signal(time.Minute, protocol.PreviewClose, "")
		r.run()
		assert.Equal(t, "status a failure 1 cluster: 1 upgrade, 1 failed to plan (1 offline)", r.reports[2])
	})
	t.Run("the plan failing is an error status and comment", func(t *testing.T) {
		r := newPreviewRig(t)
		r.planErr = temporal.NewNonRetryableApplicationError("commit not found on refs/pull/7/head", "RefNotFound", nil)
		r.signal(0, protocol.PreviewOpen, sha('a'))
		r.signal(time.Minute, protocol.PreviewClose, "")
		r.run()
		assert.Equal(t, "status a error the plan failed: commit not found on refs/pull/7/head", r.reports[2])
		assert.Contains(t, r.bodies[0], "Flotilla could not plan this pull request")
	})
	t.Run("a refused comment does not stop the preview", func(t *testing.T) {
		r := newPreviewRig(t)
		r.failComment = temporal.NewNonRetryableApplicationError("HTTP 403", activities.ErrTypeGitHostRefused, nil)
		r.signal(0, protocol.PreviewOpen, sha('a'))
		r.signal(time.Minute, protocol.PreviewUpdate, sha('b'))
		r.signal(2*time.Minute, protocol.PreviewClose, "")
		s := r.run()
		assert.Equal(t, []string{"status a pending planning…", "status a success 2 clusters: 1 upgrade, 1 install",
			"status b pending planning…", "status b success 2 clusters: 1 upgrade, 1 install"}, r.reports)
		assert.Zero(t, s.CommentID)
	})
	t.Run("closed while planning ends after the plan", func(t *testing.T) {
		r := newPreviewRig(t)
		r.planTime = 5 * time.Minute
		r.signal(0, protocol.PreviewOpen, sha('a'))
		r.signal(time.Minute, protocol.PreviewUpdate, sha('b'))
		r.signal(2*time.Minute, protocol.PreviewClose, "")
		r.run()
		assert.Len(t, r.plans, 1, "a closed pull request's newer head is not planned")
	})
}
