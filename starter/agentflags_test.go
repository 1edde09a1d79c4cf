package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

func TestParseToleration(t *testing.T) {
	tests := []struct {
		in      string
		want    corev1.Toleration
		wantErr string // a part of the error; empty: no error
	}{
		{in: "dedicated=agents:NoSchedule", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule}},
		{in: "example.com/gpu:NoExecute", want: corev1.Toleration{Key: "example.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		{in: "zone=edge:PreferNoSchedule", want: corev1.Toleration{Key: "zone", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectPreferNoSchedule}},
		// KEY=:EFFECT tolerates the empty value only, unlike KEY:EFFECT.
		{in: "spot=:NoSchedule", want: corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}},
		{in: "dedicated=agents:noschedule", wantErr: "effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		{in: "dedicated=agents:", wantErr: "effect must be"},
		{in: "dedicated=agents:NoSchedule:NoExecute", wantErr: "effect must be"},
		{in: "dedicated=agents", wantErr: "want KEY[=VALUE]:EFFECT"},
		{in: ":NoSchedule", wantErr: "want KEY[=VALUE]:EFFECT"},
		{in: "", wantErr: "want KEY[=VALUE]:EFFECT"},
		{in: "bad key:NoSchedule", wantErr: `"bad key:NoSchedule"`},
		{in: "-dedicated:NoSchedule", wantErr: "-dedicated"},
		{in: "=agents:NoSchedule", wantErr: "=agents"},
		{in: "dedicated=not valid:NoSchedule", wantErr: "not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseToleration(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--agent-toleration")
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// parseAgentFlags binds the agent flags to a command and parses args.
func parseAgentFlags(t *testing.T, args ...string) *agentFlags {
	t.Helper()
	var a agentFlags
	cmd := &cobra.Command{Use: "add"}
	a.bindFlags(cmd)
	require.NoError(t, cmd.Flags().Parse(args))
	return &a
}

func TestAgentFlags_Apply(t *testing.T) {
	dir := t.TempDir()
	configFile := filepath.Join(dir, "agent.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(`namespace: from-file
image: mirror.example.com/worker:v1
priorityClassName: low
tolerations:
- key: from-file
  operator: Exists
  effect: NoSchedule
nodeSelector:
  pool: file
  disk: ssd
env:
- name: FROM_FILE
  value: "1"
`), 0o600))
	badFile := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badFile, []byte("namespace: x\nreplicas: 2\n"), 0o600))

	tests := []struct {
		name    string
		args    []string
		want    *protocol.AgentApply // nil: no agent change
		wantErr string
	}{
		{name: "no agent", args: nil, want: nil},
		{name: "install with defaults", args: []string{"--install-agent"},
			want: &protocol.AgentApply{Managed: true, Config: &protocol.AgentConfig{}}},
		{name: "every flag", args: []string{"--install-agent",
			"--agent-namespace", "agents", "--agent-image", "worker:v2", "--agent-temporal-address", "temporal:7233",
			"--agent-temporal-namespace", "prod", "--agent-tls-server-name", "temporal.example.com",
			"--agent-tls-secret", "agent-tls", "--agent-toleration", "dedicated=agents:NoSchedule", "--agent-toleration", "gpu:NoExecute",
			"--agent-env", "HTTPS_PROXY=http://proxy:3128", "--agent-env", "EMPTY=", "--agent-env", "URL=a=b",
			"--agent-node-selector", "pool=system", "--agent-priority-class", "high"},
			want: &protocol.AgentApply{Managed: true, Config: &protocol.AgentConfig{
				Namespace: "agents", Image: "worker:v2", TemporalAddress: "temporal:7233", TemporalNamespace: "prod",
				TLSServerName: "temporal.example.com", TLSSecret: "agent-tls",
				Tolerations: []corev1.Toleration{
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule},
					{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				},
				Env:               []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}, {Name: "EMPTY"}, {Name: "URL", Value: "a=b"}},
				NodeSelector:      map[string]string{"pool": "system"},
				PriorityClassName: "high",
			}}},
		{name: "flags override and add to the file", args: []string{"--install-agent", "--agent-config", configFile,
			"--agent-namespace", "from-flag", "--agent-toleration", "gpu:NoExecute", "--agent-node-selector", "pool=flag",
			"--agent-env", "FROM_FLAG=2"},
			want: &protocol.AgentApply{Managed: true, Config: &protocol.AgentConfig{
				Namespace: "from-flag", Image: "mirror.example.com/worker:v1", PriorityClassName: "low",
				Tolerations: []corev1.Toleration{
					{Key: "from-file", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				},
				NodeSelector: map[string]string{"pool": "flag", "disk": "ssd"},
				Env:          []corev1.EnvVar{{Name: "FROM_FILE", Value: "1"}, {Name: "FROM_FLAG", Value: "2"}},
			}}},
		{name: "namespace without --install-agent", args: []string{"--agent-namespace", "agents"}, wantErr: "need --install-agent"},
		{name: "toleration without --install-agent", args: []string{"--agent-toleration", "gpu:NoExecute"}, wantErr: "need --install-agent"},
		{name: "config file without --install-agent", args: []string{"--agent-config", configFile}, wantErr: "need --install-agent"},
		{name: "env without --install-agent", args: []string{"--agent-env", "A=1"}, wantErr: "need --install-agent"},
		{name: "node selector without --install-agent", args: []string{"--agent-node-selector", "a=1"}, wantErr: "need --install-agent"},
		{name: "priority class without --install-agent", args: []string{"--agent-priority-class", "high"}, wantErr: "need --install-agent"},
		{name: "TLS server name without --install-agent", args: []string{"--agent-tls-server-name", "t"}, wantErr: "need --install-agent"},
		{name: "TLS secret without --install-agent", args: []string{"--agent-tls-secret", "s"}, wantErr: "need --install-agent"},
		{name: "bad TLS secret name", args: []string{"--install-agent", "--agent-tls-secret", "Bad_Name"}, wantErr: `--agent-tls-secret "Bad_Name"`},
		{name: "bad toleration", args: []string{"--install-agent", "--agent-toleration", "gpu:Sometimes"}, wantErr: "effect must be"},
		{name: "bad env", args: []string{"--install-agent", "--agent-env", "NOVALUE"}, wantErr: `--agent-env "NOVALUE"`},
		{name: "env without name", args: []string{"--install-agent", "--agent-env", "=x"}, wantErr: "want NAME=VALUE"},
		{name: "bad node selector", args: []string{"--install-agent", "--agent-node-selector", "pool"}, wantErr: "--agent-node-selector"},
		{name: "unknown field in the file", args: []string{"--install-agent", "--agent-config", badFile}, wantErr: badFile},
		{name: "missing file", args: []string{"--install-agent", "--agent-config", filepath.Join(dir, "absent.yaml")}, wantErr: "--agent-config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAgentFlags(t, tt.args...).apply()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
