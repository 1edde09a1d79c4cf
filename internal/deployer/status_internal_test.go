package deployer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// object parses one YAML document into an object as the dynamic client
// returns it (integers as int64, which kstatus requires).
func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	obj := new(unstructured.Unstructured)
	require.NoError(t, obj.UnmarshalJSON(js))
	return obj
}

// deployment returns Deployment web wanting one replica, at generation 2,
// with status (YAML, indented by 2) below its status key.
func deployment(status string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, generation: 2}
spec:
  replicas: 1
  progressDeadlineSeconds: 600
status:
` + status
}

// availableDeployment is what the deployment controller reports once web's
// one replica is up.
var availableDeployment = deployment(`  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  readyReplicas: 1
  availableReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
`)

// widget returns a custom resource with conditions (a YAML flow list).
func widget(conditions string) string {
	return `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default}
status:
  conditions: ` + conditions + "\n"
}

// readyFalse is a Widget whose Ready condition is False.
var readyFalse = widget(`[{type: Ready, status: "False", reason: Down, message: backend down}]`)

// job returns Job migrate with status (YAML, indented by 2).
func job(status string) string {
	return `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: default}
spec: {completions: 1, parallelism: 1}
status:
` + status
}

var (
	jobNotStarted = job("  active: 0\n")
	jobRunning    = job("  startTime: \"2026-01-01T00:00:00Z\"\n  active: 1\n")
	jobComplete   = job(`  startTime: "2026-01-01T00:00:00Z"
  completionTime: "2026-01-01T00:01:00Z"
  succeeded: 1
  conditions:
  - {type: SuccessCriteriaMet, status: "True"}
  - {type: Complete, status: "True"}
`)
	jobFailed = job(`  startTime: "2026-01-01T00:00:00Z"
  failed: 1
  conditions:
  - {type: FailureTarget, status: "True"}
  - {type: Failed, status: "True", reason: BackoffLimitExceeded}
`)
)

func TestClassify(t *testing.T) {
	ignoreReadyFalse := []map[string]string{{"type": "Ready", "status": "False"}}
	waitForJobs := ReadyOptions{WaitForJobs: true}

	tests := []struct {
		name string
		doc  string // "" for an object that does not exist
		opts ReadyOptions
		want state
		// wantReason is the whole reason; "" for ready and missing objects.
		wantReason string
	}{
		{name: "missing object", doc: "", want: stateMissing},
		{
			name: "ConfigMap is always ready",
			doc:  "{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}",
			want: stateReady,
		},

		// Deployments.
		{
			name: "Deployment with fewer available than updated replicas",
			doc: deployment(`  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  readyReplicas: 0
  availableReplicas: 0
`),
			want: stateNotReady, wantReason: "Available: 0/1",
		},
		{
			name:       "Deployment without status",
			doc:        deployment("  {}\n"),
			want:       stateNotReady,
			wantReason: "Replicas: 0/1",
		},
		{name: "available Deployment", doc: availableDeployment, want: stateReady},
		{
			name: "Deployment whose spec change is not yet observed",
			doc: deployment(`  observedGeneration: 1
  replicas: 1
  updatedReplicas: 1
  readyReplicas: 1
  availableReplicas: 1
`),
			want: stateNotReady, wantReason: "Deployment generation is 2, but latest observed generation is 1",
		},
		{
			name: "Deployment past its progress deadline is failed",
			doc: deployment(`  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  conditions:
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded}
`),
			want: stateNotReady, wantReason: "Progress deadline exceeded",
		},
		{
			name: "ignoring the failing condition leaves the replica counts to judge",
			doc: deployment(`  observedGeneration: 2
  replicas: 1
  updatedReplicas: 1
  readyReplicas: 1
  availableReplicas: 1
  conditions:
  - {type: Available, status: "True"}
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded}
`),
			opts: ReadyOptions{IgnoreConditions: []map[string]string{{"type": "Progressing", "status": "False"}}},
			// The deadline no longer fails it, but nothing says the new
			// ReplicaSet is available either.
			want: stateNotReady, wantReason: "ReplicaSet not Available",
		},
		{
			name: "object being deleted is terminating",
			doc: `apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: default, deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [x]}
`,
			want: stateNotReady, wantReason: "Resource scheduled for deletion",
		},

		// Custom resources and ignore.conditions.
		{name: "custom resource with Ready=False", doc: readyFalse, want: stateNotReady, wantReason: "backend down"},
		{
			name: "custom resource with Ready=False ignored",
			doc:  readyFalse,
			opts: ReadyOptions{IgnoreConditions: ignoreReadyFalse},
			want: stateReady,
		},
		{
			name: "ignore entry must match every field",
			doc:  readyFalse,
			opts: ReadyOptions{IgnoreConditions: []map[string]string{{"type": "Ready", "status": "False", "reason": "Other"}}},
			want: stateNotReady, wantReason: "backend down",
		},
		{
			name: "ignore entry for another status does not match",
			doc:  readyFalse,
			opts: ReadyOptions{IgnoreConditions: []map[string]string{{"type": "Ready", "status": "True"}}},
			want: stateNotReady, wantReason: "backend down",
		},
		{
			name: "any one matching entry is enough",
			doc:  readyFalse,
			opts: ReadyOptions{IgnoreConditions: []map[string]string{{"type": "Synced"}, {"reason": "Down"}}},
			want: stateReady,
		},
		{
			name: "empty ignore entry matches nothing",
			doc:  readyFalse,
			opts: ReadyOptions{IgnoreConditions: []map[string]string{{}}},
			want: stateNotReady, wantReason: "backend down",
		},
		{
			name: "custom resource with Ready=True",
			doc:  widget(`[{type: Ready, status: "True"}]`),
			want: stateReady,
		},
		{
			name: "stalled custom resource is failed",
			doc:  widget(`[{type: Stalled, status: "True", reason: Broken, message: cannot reach backend}]`),
			want: stateNotReady, wantReason: "cannot reach backend",
		},
		{
			name: "only the matching conditions are dropped",
			doc: widget(`[{type: Stalled, status: "True", message: cannot reach backend},
  {type: Ready, status: "False", message: backend down}]`),
			opts: ReadyOptions{IgnoreConditions: []map[string]string{{"type": "Stalled"}}},
			want: stateNotReady, wantReason: "backend down",
		},
		{
			name: "stalled without a message says Failed",
			doc:  widget(`[{type: Stalled, status: "True"}]`),
			want: stateNotReady, wantReason: "Failed",
		},
		{
			name:       "malformed conditions are unknown",
			doc:        widget(`"not a list"`),
			want:       stateUnknown,
			wantReason: "status unknown: ",
		},

		// Jobs.
		{name: "Job not started, without waitForJobs", doc: jobNotStarted, want: stateReady},
		{name: "Job not started, with waitForJobs", doc: jobNotStarted, opts: waitForJobs, want: stateNotReady, wantReason: "Job not started"},
		{name: "running Job, without waitForJobs", doc: jobRunning, want: stateReady},
		{
			name: "running Job, with waitForJobs", doc: jobRunning, opts: waitForJobs,
			want: stateNotReady, wantReason: "Job in progress. success:0, active: 1, failed: 0",
		},
		{name: "complete Job, without waitForJobs", doc: jobComplete, want: stateReady},
		{name: "complete Job, with waitForJobs", doc: jobComplete, opts: waitForJobs, want: stateReady},
		{name: "failed Job, without waitForJobs", doc: jobFailed, want: stateNotReady, wantReason: "Job Failed. failed: 1/1"},
		{name: "failed Job, with waitForJobs", doc: jobFailed, opts: waitForJobs, want: stateNotReady, wantReason: "Job Failed. failed: 1/1"},
		{
			name: "ignored Complete condition leaves a Job incomplete",
			doc:  jobComplete,
			opts: ReadyOptions{WaitForJobs: true, IgnoreConditions: []map[string]string{{"type": "Complete"}}},
			want: stateNotReady, wantReason: "Job in progress. success:1, active: 0, failed: 0",
		},
		{
			name: "a Job of another group is judged like any object",
			doc: `apiVersion: example.com/v1
kind: Job
metadata: {name: j, namespace: default}
status: {conditions: [{type: Ready, status: "False", message: queued}]}
`,
			want: stateNotReady, wantReason: "queued",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj *unstructured.Unstructured
			if tt.doc != "" {
				obj = object(t, tt.doc)
			}
			var before *unstructured.Unstructured
			if obj != nil {
				before = obj.DeepCopy()
			}

			got, reason := classify(obj, tt.opts)

			assert.Equal(t, tt.want, got, "state (reason %q)", reason)
			if tt.want == stateUnknown {
				assert.Contains(t, reason, tt.wantReason)
				assert.Greater(t, len(reason), len(tt.wantReason), "the reason carries kstatus's error")
			} else {
				assert.Equal(t, tt.wantReason, reason)
			}
			assert.Equal(t, before, obj, "classify must not modify the object")
		})
	}
}

func TestConditionMatches(t *testing.T) {
	cond := map[string]any{"type": "Ready", "status": "False", "reason": "Down", "observedGeneration": int64(3)}
	tests := []struct {
		want map[string]string
		ok   bool
	}{
		{want: map[string]string{"type": "Ready"}, ok: true},
		{want: map[string]string{"type": "Ready", "status": "False", "reason": "Down"}, ok: true},
		{want: map[string]string{"type": "ready"}, ok: false},                   // values are case-sensitive
		{want: map[string]string{"type": "Ready", "message": ""}, ok: false},    // absent is not ""
		{want: map[string]string{"observedGeneration": "3"}, ok: false},         // only string fields match
		{want: map[string]string{"type": "Ready", "status": "True"}, ok: false}, // all must match
		{want: map[string]string{}, ok: false},                                  // empty matches nothing
		{want: nil, ok: false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.want), func(t *testing.T) {
			assert.Equal(t, tt.ok, conditionMatches(cond, tt.want))
		})
	}
}

func TestStatus_add(t *testing.T) {
	var st Status
	st.Resources = 30
	for i := range 12 {
		st.add(fmt.Sprintf("Deployment ns/web-%02d", 11-i), stateNotReady, "Available: 0/1")
	}
	for i := range 11 {
		st.add(fmt.Sprintf("ConfigMap ns/c-%02d", 10-i), stateMissing, "")
	}
	st.add("Widget ns/w", stateUnknown, "status unknown: bad conditions")
	for range 6 {
		st.add("ConfigMap ns/ok", stateReady, "")
	}
	st.NotReady, st.Missing = firstSorted(st.NotReady), firstSorted(st.Missing)

	assert.Equal(t, 6, st.Ready)
	assert.Equal(t, 12, st.NotReadyCount, "exact, not truncated")
	assert.Equal(t, 11, st.MissingCount, "exact, not truncated")
	assert.Equal(t, 1, st.UnknownCount)
	assert.Equal(t, st.Resources, st.Ready+st.NotReadyCount+st.MissingCount+st.UnknownCount)
	assert.False(t, st.AllReady())

	wantNotReady := make([]string, 0, maxListed)
	for i := range maxListed {
		wantNotReady = append(wantNotReady, fmt.Sprintf("Deployment ns/web-%02d: Available: 0/1", i))
	}
	assert.Equal(t, wantNotReady, st.NotReady, "sorted, first 10; the Widget sorts after the Deployments")
	wantMissing := make([]string, 0, maxListed)
	for i := range maxListed {
		wantMissing = append(wantMissing, fmt.Sprintf("ConfigMap ns/c-%02d", i))
	}
	assert.Equal(t, wantMissing, st.Missing)
}

func TestStatus_addListsUnknownAsNotReady(t *testing.T) {
	st := Status{Resources: 2}
	st.add("Widget ns/w", stateUnknown, "status unknown: bad conditions")
	st.add("Deployment ns/web", stateNotReady, "Replicas: 0/1")
	st.NotReady, st.Missing = firstSorted(st.NotReady), firstSorted(st.Missing)

	assert.Equal(t, Status{
		Resources:     2,
		NotReady:      []string{"Deployment ns/web: Replicas: 0/1", "Widget ns/w: status unknown: bad conditions"},
		NotReadyCount: 1,
		UnknownCount:  1,
	}, st)
}
