package envflag_test

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/envflag"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		args    []string          // command line
		env     map[string]string // environment
		want    string            // resulting --temporal-address
		wantN   int               // resulting --max-concurrent-activities
		wantErr string
	}{
		{name: "default", want: "d", wantN: 1},
		{name: "env sets flag", env: map[string]string{"FLOTILLA_TEMPORAL_ADDRESS": "e:1"}, want: "e:1", wantN: 1},
		{name: "flag wins over env", args: []string{"--temporal-address=f:1"}, env: map[string]string{"FLOTILLA_TEMPORAL_ADDRESS": "e:1"}, want: "f:1", wantN: 1},
		{name: "empty env value is a value", env: map[string]string{"FLOTILLA_TEMPORAL_ADDRESS": ""}, want: "", wantN: 1},
		{name: "dashes become underscores", env: map[string]string{"FLOTILLA_MAX_CONCURRENT_ACTIVITIES": "7"}, want: "d", wantN: 7},
		{name: "bad value names the variable, not the value", env: map[string]string{"FLOTILLA_MAX_CONCURRENT_ACTIVITIES": "secret-ish"}, wantErr: "invalid value in $FLOTILLA_MAX_CONCURRENT_ACTIVITIES for --max-concurrent-activities"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			addr := fs.String("temporal-address", "d", "")
			n := fs.Int("max-concurrent-activities", 1, "")
			require.NoError(t, fs.Parse(tt.args))
			err := envflag.Apply(fs, "FLOTILLA")
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "secret-ish")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, *addr)
			assert.Equal(t, tt.wantN, *n)
		})
	}
}

func TestAnnotate(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("log-level", "info", "log level")
	envflag.Annotate(fs, "FLOTILLA")
	assert.Equal(t, "log level [$FLOTILLA_LOG_LEVEL]", fs.Lookup("log-level").Usage)
}
