package main

import (
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/kubenative"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManagementFlags: the management mode is off by default, takes a
// kubeconfig or the pod's service account but not both, and keeps its
// Lease in $POD_NAMESPACE unless told.
func TestManagementFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "flotilla-prod")
	tests := []struct {
		name    string
		args    []string
		enabled bool
		wantErr string
		wantNS  string
	}{
		{"off by default", nil, false, "", "flotilla-prod"},
		{"kubeconfig", []string{"--management-kubeconfig", "/k"}, true, "", "flotilla-prod"},
		{"in cluster, own namespace", []string{"--management-in-cluster", "--management-namespace", "mgmt"}, true, "", "mgmt"},
		{"both", []string{"--management-kubeconfig", "/k", "--management-in-cluster"}, true,
			"--management-kubeconfig and --management-in-cluster are mutually exclusive", "flotilla-prod"},
		{"lease too short", []string{"--management-in-cluster", "--management-lease-duration", "100ms"}, true,
			"--management-lease-duration must be at least 1s", "flotilla-prod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f managementFlags
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			f.bindFlags(fs)
			require.NoError(t, fs.Parse(tt.args))
			assert.Equal(t, tt.enabled, f.enabled())
			assert.Equal(t, tt.wantNS, f.Namespace)
			if tt.wantErr == "" {
				assert.NoError(t, f.validate())
			} else {
				assert.EqualError(t, f.validate(), tt.wantErr)
			}
		})
	}
	var f managementFlags
	f.bindFlags(pflag.NewFlagSet("y", pflag.ContinueOnError))
	assert.Equal(t, 15*time.Second, f.LeaseDuration)
}

func TestRegistration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gateway string
		want    kubenative.Registration
	}{
		{name: "temporal", want: kubenative.Registration{Address: "temporal:7233", Namespace: "fleet"}},
		{name: "gateway", gateway: "flotilla.flotilla-system.svc:7243",
			want: kubenative.Registration{Address: "flotilla.flotilla-system.svc:7243", Namespace: "fleet", Gateway: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o options
			o.Temporal.Address, o.Temporal.Namespace = "temporal:7233", "fleet"
			o.Gateway.Advertise = tc.gateway
			assert.Equal(t, tc.want, o.registration())
		})
	}
}
