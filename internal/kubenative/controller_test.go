package kubenative

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
