package kubenative

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestElectionConfig: the renew deadline and retry period keep
// client-go's proportions (15s/10s/2s), which its validation requires.
func TestElectionConfig(t *testing.T) {
	for _, d := range []time.Duration{3 * time.Second, 15 * time.Second} {
		c := electionConfig(Config{LeaseDuration: d}, nil, nil)
		assert.Equal(t, d, c.LeaseDuration)
		assert.Less(t, c.RenewDeadline, c.LeaseDuration)
		assert.Less(t, time.Duration(float64(c.RetryPeriod)*1.2), c.RenewDeadline) // leaderelection.JitterFactor
		assert.True(t, c.ReleaseOnCancel)
	}
}

// TestConfigValidate names what is missing.
func TestConfigValidate(t *testing.T) {
	assert.EqualError(t, Config{}.Validate(), "management cluster: no REST config\n"+
		"management cluster: no Temporal client or task queue\nmanagement cluster: no sealer\n"+
		"management cluster: no namespace for the Lease")
}

// TestDecide: the step reconcile takes for what it observed.
func TestDecide(t *testing.T) {
	const fin = FinalizerGitRepo
	now := metav1.Now()
	obj := func(deleting bool, finalizers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetFinalizers(finalizers)
		if deleting {
			u.SetDeletionTimestamp(&now)
		}
		return u
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want step
	}{
		{"not found", nil, stepForget},
		{"new object", obj(false), stepAdopt},
		{"another controller's finalizer only", obj(false, "example.com/other"), stepAdopt},
		{"ours", obj(false, "example.com/other", fin), stepApply},
		{"deleting with ours", obj(true, fin), stepFinalize},
		{"deleting, ours removed, another left", obj(true, "example.com/other"), stepIgnore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decide(tt.obj, fin))
		})
	}
}
