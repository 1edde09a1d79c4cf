package main

import (
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// agentFlags are `cluster add`'s settings for a managed agent.
type agentFlags struct {
	install          bool
	configFile       string
	namespace        string
	image            string
	temporalAddress  string
	tolerations      []string
	env              []string
	nodeSelector     []string
	priorityClass    string
	temporalNS       string
	temporalSrvrName string
	tlsSecret        string
}

func (a *agentFlags) bindFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&a.install, "install-agent", false, "run the cluster in pull mode with an agent the controller installs and upgrades through the kubeconfig")
	fs.StringVar(&a.configFile, "agent-config", "", "YAML file of the agent's own settings (namespace, image, temporalAddress, tolerations, affinity, nodeSelector, resources, env, priorityClassName); flags override it")
	fs.StringVar(&a.namespace, "agent-namespace", "", "namespace of the agent (default flotilla-system)")
	fs.StringVar(&a.image, "agent-image", "", "agent image (default: the controller's agent image)")
	fs.StringVar(&a.temporalAddress, "agent-temporal-address", "", "Temporal address the agent dials (default: the controller's agent defaults, then its own address)")
	fs.StringVar(&a.temporalNS, "agent-temporal-namespace", "", "Temporal namespace of the agent (default: the controller's)")
	fs.StringVar(&a.temporalSrvrName, "agent-tls-server-name", "", "server name the agent verifies in Temporal's certificate")
	fs.StringVar(&a.tlsSecret, "agent-tls-secret", "", "Secret in the agent's namespace on the cluster holding its Temporal TLS files (ca.crt, tls.crt, tls.key), e.g. issued by cert-manager; default: the controller's files")
	fs.StringArrayVar(&a.tolerations, "agent-toleration", nil, "toleration KEY[=VALUE]:EFFECT (or KEY:EFFECT for Exists), added to the controller's; repeatable")
	fs.StringArrayVar(&a.env, "agent-env", nil, "environment variable NAME=VALUE of the agent; repeatable")
	fs.StringArrayVar(&a.nodeSelector, "agent-node-selector", nil, "node selector k=v of the agent; repeatable")
	fs.StringVar(&a.priorityClass, "agent-priority-class", "", "priority class of the agent pod")
}

// apply returns the agent change, nil without --install-agent. Agent
// flags without --install-agent are an error, not silently ignored.
func (a *agentFlags) apply() (*protocol.AgentApply, error) {
	if !a.install {
		if a.anySet() {
			return nil, fmt.Errorf("--agent-* flags need --install-agent")
		}
		return nil, nil
	}
	cfg, err := a.readConfig()
	if err != nil {
		return nil, err
	}
	for dst, v := range map[*string]string{&cfg.Namespace: a.namespace, &cfg.Image: a.image, &cfg.TemporalAddress: a.temporalAddress,
		&cfg.TemporalNamespace: a.temporalNS, &cfg.TLSServerName: a.temporalSrvrName, &cfg.TLSSecret: a.tlsSecret, &cfg.PriorityClassName: a.priorityClass} {
		if v != "" {
			*dst = v
		}
	}
	for _, t := range a.tolerations {
		tol, err := parseToleration(t)
		if err != nil {
			return nil, err
		}
		cfg.Tolerations = append(cfg.Tolerations, tol)
	}
	env, err := parseEnv(a.env)
	if err != nil {
		return nil, err
	}
	cfg.Env = append(cfg.Env, env...)
	if cfg.TLSSecret != "" {
		if msgs := validation.IsDNS1123Subdomain(cfg.TLSSecret); len(msgs) > 0 {
			return nil, fmt.Errorf("--agent-tls-secret %q: %s", cfg.TLSSecret, strings.Join(msgs, "; "))
		}
	}
	if len(a.nodeSelector) > 0 {
		sel, err := parseNodeSelector(a.nodeSelector)
		if err != nil {
			return nil, err
		}
		if cfg.NodeSelector == nil {
			cfg.NodeSelector = map[string]string{}
		}
		maps.Copy(cfg.NodeSelector, sel)
	}
	return &protocol.AgentApply{Managed: true, Config: &cfg}, nil
}

// anySet reports whether any agent flag but --install-agent is set.
func (a *agentFlags) anySet() bool {
	return a.configFile != "" || a.namespace != "" || a.image != "" || a.temporalAddress != "" || a.temporalNS != "" ||
		a.temporalSrvrName != "" || a.tlsSecret != "" || len(a.tolerations)+len(a.env)+len(a.nodeSelector) > 0 || a.priorityClass != ""
}

// readConfig reads --agent-config, if set; fields it does not know are an
// error.
func (a *agentFlags) readConfig() (protocol.AgentConfig, error) {
	var cfg protocol.AgentConfig
	if a.configFile == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(a.configFile)
	if err != nil {
		return cfg, fmt.Errorf("--agent-config: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("--agent-config %s: %w", a.configFile, err)
	}
	return cfg, nil
}

// parseEnv parses --agent-env NAME=VALUE flags.
func parseEnv(flags []string) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	for _, e := range flags {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--agent-env %q: want NAME=VALUE", e)
		}
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("--agent-env %q: %s", e, strings.Join(msgs, "; "))
		}
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	return env, nil
}

// parseNodeSelector parses and validates --agent-node-selector k=v flags.
func parseNodeSelector(flags []string) (map[string]string, error) {
	sel, _, err := parseLabels(flags, false)
	if err != nil {
		return nil, fmt.Errorf("--agent-node-selector: %w", err)
	}
	if errs := api.ValidateLabels(sel, field.NewPath("agent", "nodeSelector")); len(errs) > 0 {
		return nil, fmt.Errorf("--agent-node-selector: %w", errs.ToAggregate())
	}
	return sel, nil
}

// parseToleration parses KEY[=VALUE]:EFFECT; KEY:EFFECT tolerates any
// value (operator Exists).
func parseToleration(s string) (corev1.Toleration, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Toleration{}, fmt.Errorf("--agent-toleration %q: want KEY[=VALUE]:EFFECT", s)
	}
	t := corev1.Toleration{Effect: corev1.TaintEffect(effect)}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return t, fmt.Errorf("--agent-toleration %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	if k, v, ok := strings.Cut(kv, "="); ok {
		t.Key, t.Operator, t.Value = k, corev1.TolerationOpEqual, v
	} else {
		t.Key, t.Operator = kv, corev1.TolerationOpExists
	}
	if errs := api.ValidateTolerations([]corev1.Toleration{t}, field.NewPath("toleration")); len(errs) > 0 {
		return t, fmt.Errorf("--agent-toleration %q: %w", s, errs.ToAggregate())
	}
	return t, nil
}
