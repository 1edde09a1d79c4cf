package main

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The webhook receiver's bounds are validated: a body, connection and
// in-flight limit each, and no more deliveries at once than connections.
func TestWebhookFlags_Validate(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string // substring; "" for valid
	}{
		{nil, ""},
		{[]string{"--webhook-max-connections", "8", "--webhook-max-in-flight", "8"}, ""},
		{[]string{"--webhook-max-connections", "0"}, "must be positive"},
		{[]string{"--webhook-max-in-flight", "0"}, "must be positive"},
		{[]string{"--webhook-max-connections", "4", "--webhook-max-in-flight", "8"}, "must not exceed --webhook-max-connections"},
		{[]string{"--webhook-max-body", "0"}, "--webhook-max-body"},
	}
	for _, tt := range tests {
		var f webhookFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.bindFlags(fs)
		require.NoError(t, fs.Parse(tt.args))
		err := f.validate()
		if tt.wantErr == "" {
			assert.NoError(t, err, "%v", tt.args)
			continue
		}
		assert.ErrorContains(t, err, tt.wantErr, "%v", tt.args)
	}
}
