package status_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// liveDeployment is a deployment of bundle "app" on cluster "c1",
// applied at "s-1:h" and Ready, as a rollout leaves it.
func liveDeployment() status.Deployment {
	return status.Deployment{Bundle: "app", Cluster: "c1", Release: "app", Namespace: "default",
		DeploymentID: "s-1:h", AppliedDeploymentID: "s-1:h", State: status.Ready, Resources: 3, ReadyResources: 3}
}

// editedConfigMap is a modified object as the watch lists it.
var editedConfigMap = status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "app",
	Patch: `{"data":{"value":"one"}}`}

// goneService is a missing object as the watch lists it.
var goneService = status.ModifiedStatus{APIVersion: "v1", Kind: "Service", Namespace: "default", Name: "web", Missing: true}

// liveReport is a clean report about liveDeployment's release.
func liveReport() status.LiveReport {
	return status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: "s-1:h",
		Resources: 3, Ready: 3}
}

func TestDeploymentWithLive(t *testing.T) {
	tests := []struct {
		name   string
		dep    func(*status.Deployment)
		report func(*status.LiveReport)
		// unchanged: d comes back exactly as it went in.
		unchanged   bool
		wantState   status.State
		wantMessage string
	}{
		{name: "a report about another deployment ID is ignored",
			report:    func(r *status.LiveReport) { r.DeploymentID, r.Modified = "s-0:h", 1 },
			unchanged: true},
		{name: "a report without a deployment ID is ignored",
			dep:       func(d *status.Deployment) { d.DeploymentID, d.AppliedDeploymentID = "", "" },
			report:    func(r *status.LiveReport) { r.DeploymentID, r.Modified = "", 1 },
			unchanged: true},
		{name: "a deployment not applied at its ID yet is left alone",
			dep:       func(d *status.Deployment) { d.AppliedDeploymentID = "s-0:h" },
			report:    func(r *status.LiveReport) { r.Modified = 1 },
			unchanged: true},
		{name: "ErrApplied is left alone",
			dep:       func(d *status.Deployment) { d.State, d.Message = status.ErrApplied, "cluster c1: upgrade failed" },
			report:    func(r *status.LiveReport) { r.Missing = 1 },
			unchanged: true},
		{name: "WaitApplied is left alone",
			dep:       func(d *status.Deployment) { d.State = status.WaitApplied },
			unchanged: true},
		{name: "OutOfSync is left alone",
			dep:       func(d *status.Deployment) { d.State, d.Message = status.OutOfSync, "cluster c1 is paused" },
			report:    func(r *status.LiveReport) { r.Modified = 1 },
			unchanged: true},
		{name: "Pending is left alone",
			dep:       func(d *status.Deployment) { d.State = status.Pending },
			unchanged: true},
		{name: "objects not ready win over drift",
			report: func(r *status.LiveReport) {
				r.Ready, r.NotReady, r.Modified = 1, 1, 1
				r.NotReadyStatus = []string{"Deployment default/web: Available: 0/1"}
				r.ModifiedStatus = []status.ModifiedStatus{editedConfigMap}
			},
			wantState: status.NotReady, wantMessage: "cluster c1: Deployment default/web: Available: 0/1"},
		{name: "objects of unknown readiness make it NotReady too",
			report:    func(r *status.LiveReport) { r.Ready, r.Unknown = 2, 1 },
			wantState: status.NotReady},
		{name: "drift makes a Ready deployment Modified",
			report: func(r *status.LiveReport) {
				r.Ready, r.Modified, r.Missing = 1, 1, 1
				r.ModifiedStatus = []status.ModifiedStatus{editedConfigMap, goneService}
			},
			wantState: status.Modified,
			wantMessage: `cluster c1: ConfigMap default/app: modified {"data":{"value":"one"}}; ` +
				"Service default/web: missing"},
		{name: "a cut list ends with ... and the error follows",
			report: func(r *status.LiveReport) {
				r.Modified, r.Incomplete = 3, true
				r.ModifiedStatus = []status.ModifiedStatus{editedConfigMap}
				r.Error = "correct drift: rollback failed"
			},
			wantState: status.Modified,
			wantMessage: `cluster c1: ConfigMap default/app: modified {"data":{"value":"one"}}; ...; ` +
				"correct drift: rollback failed"},
		{name: "an orphan alone is drift",
			report: func(r *status.LiveReport) {
				r.Orphaned = 1
				r.ModifiedStatus = []status.ModifiedStatus{{Kind: "ConfigMap", Namespace: "default", Name: "old", Delete: true}}
			},
			wantState: status.Modified, wantMessage: "cluster c1: ConfigMap default/old: orphaned"},
		{name: "a clean report makes a Modified deployment Ready and clears its message",
			dep: func(d *status.Deployment) {
				d.State, d.Modified, d.Message = status.Modified, 1, "cluster c1: ConfigMap default/app: modified {}"
				d.ModifiedStatus = []status.ModifiedStatus{editedConfigMap}
			},
			wantState: status.Ready},
		{name: "a clean report makes a NotReady deployment Ready",
			dep: func(d *status.Deployment) {
				d.State, d.ReadyResources, d.NotReadyResources = status.NotReady, 2, 1
				d.Message = "cluster c1: Deployment default/web: Available: 0/1"
			},
			wantState: status.Ready},
		{name: "the error of a clean report is shown on a Ready deployment",
			report:    func(r *status.LiveReport) { r.Error = "read release: forbidden" },
			wantState: status.Ready, wantMessage: "cluster c1: read release: forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := liveDeployment()
			if tt.dep != nil {
				tt.dep(&d)
			}
			r := liveReport()
			if tt.report != nil {
				tt.report(&r)
			}

			got := d.WithLive(r)

			if tt.unchanged {
				assert.Equal(t, d, got)
				return
			}
			assert.Equal(t, tt.wantState, got.State)
			assert.Equal(t, tt.wantMessage, got.Message)
			// The counts and lists are the report's, whatever the state.
			assert.Equal(t, r.Resources, got.Resources)
			assert.Equal(t, r.Ready, got.ReadyResources)
			assert.Equal(t, r.NotReady, got.NotReadyResources)
			assert.Equal(t, r.Unknown, got.Unknown)
			assert.Equal(t, r.Missing, got.Missing)
			assert.Equal(t, r.Modified, got.Modified)
			assert.Equal(t, r.Orphaned, got.Orphaned)
			assert.Equal(t, r.ModifiedStatus, got.ModifiedStatus)
			assert.Equal(t, r.Incomplete, got.Incomplete)
			// What identifies the deployment stays.
			assert.Equal(t, d.Key(), got.Key())
			assert.Equal(t, d.DeploymentID, got.DeploymentID)
			assert.Equal(t, d.AppliedDeploymentID, got.AppliedDeploymentID)
		})
	}
}

// A clean report copies every count and the correction count, and the
// deployment's ResourceCounts then carry the drift counts.
func TestDeploymentWithLive_Counts(t *testing.T) {
	d := liveDeployment()
	d.State, d.Modified, d.Message = status.Modified, 2, "cluster c1: stale"

	clean := d.WithLive(status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: "s-1:h",
		Resources: 4, Ready: 4, Corrections: 3})
	assert.Equal(t, status.Ready, clean.State)
	assert.Empty(t, clean.Message)
	assert.Equal(t, 3, clean.Corrections)
	assert.Equal(t, status.ResourceCounts{DesiredReady: 4, Ready: 4}, clean.ResourceCounts())

	drifted := d.WithLive(status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: "s-1:h",
		Resources: 4, Ready: 1, Missing: 1, Modified: 2, Orphaned: 3, Corrections: 1})
	assert.Equal(t, status.Modified, drifted.State)
	assert.Equal(t, 1, drifted.Corrections)
	assert.Equal(t, status.ResourceCounts{DesiredReady: 4, Ready: 1, Missing: 1, Modified: 2, Orphaned: 3},
		drifted.ResourceCounts())
}

func TestModifiedStatus(t *testing.T) {
	tests := []struct {
		name       string
		m          status.ModifiedStatus
		wantObject string
		wantString string
	}{
		{"modified, namespaced", editedConfigMap, "ConfigMap default/app",
			`ConfigMap default/app: modified {"data":{"value":"one"}}`},
		{"missing", goneService, "Service default/web", "Service default/web: missing"},
		{"orphaned, cluster-scoped", status.ModifiedStatus{Kind: "ClusterRole", Name: "reader", Delete: true},
			"ClusterRole reader", "ClusterRole reader: orphaned"},
		{"modified with a conflict",
			status.ModifiedStatus{Kind: "Deployment", Namespace: "default", Name: "web", Patch: `{"spec":{"replicas":1}}`,
				Conflict: "kube-controller-manager: spec.replicas"},
			"Deployment default/web",
			`Deployment default/web: modified {"spec":{"replicas":1}} (conflict: kube-controller-manager: spec.replicas)`},
		{"missing wins over a patch", status.ModifiedStatus{Kind: "Secret", Namespace: "ns", Name: "s", Missing: true, Patch: "{}"},
			"Secret ns/s", "Secret ns/s: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantObject, tt.m.Object())
			assert.Equal(t, tt.wantString, tt.m.String())
		})
	}
}
