package tests

import (
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// BenchmarkRestart (`make bench BENCH=restart`) runs the crash scenario of
// TestAgents: 3 agents (separate processes) and one push-mode cluster, 5
// idle controller restarts, 5 undisturbed rollouts timing pull and push
// deploys, then 20 rollouts each with a kill -9 of the controller at a
// random point. It writes bench/out/restart.json.
func BenchmarkRestart(b *testing.B) {
	f := startAgentFleet(b, 4)
	tok := f.newToken(b, "1h")
	f.startAgent(b, "cluster-1", tok)
	f.startAgent(b, "cluster-2", f.newToken(b, "1h"))
	f.cli(b, "cluster", "add", "cluster-3", "--kubeconfig", f.cluster("cluster-3").KubeconfigPath, "--install-agent")
	f.waitCluster(b, "cluster-3", "agent installed", time.Minute, func(r protocol.ClusterRecord) bool { return r.Agent != nil && r.Agent.DeploymentID != "" })
	f.startAgent(b, "cluster-3", "")
	f.cli(b, "cluster", "add", "cluster-4", "--kubeconfig", f.cluster("cluster-4").KubeconfigPath)
	b.ResetTimer()
	rep := runCrashRollouts(b, f, crashConfig{IdleRestarts: 5, Measured: 5, Killed: 20, Seed: uint64(time.Now().UnixNano())})
	b.StopTimer()
	writeBenchResult(b, "restart", map[string]float64{
		"controller_restarts":           float64(rep.ControllerRestarts),
		"agent_redeploys":               float64(rep.AgentRedeploys),
		"rollouts":                      float64(rep.Rollouts),
		"kills":                         float64(rep.Kills),
		"duplicate_deploy_logs":         float64(rep.DuplicateDeployLogs),
		"extra_helm_revisions":          float64(rep.ExtraHelmRevisions),
		"confirmed_interrupted_deploys": float64(rep.ConfirmedDeploys),
		"unlogged_deploys":              float64(rep.UnloggedDeploys),
		"pull_deploy_p50_ms":            median(rep.PullDeployMs),
		"push_deploy_p50_ms":            median(rep.PushDeployMs),
	})
}
