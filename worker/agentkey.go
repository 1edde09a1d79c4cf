package main

import (
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// agentKeyDir is where an agent keeps its own sealing key, under its
// state dir.
const agentKeyDir = "seal-key"

// openAgentKey loads the agent's own X25519 key pair from its state dir,
// generating it the first time. The agent publishes the public key with
// every heartbeat (AgentRecord.SealKey); controllers seal the Secrets a
// bundle copies to the cluster (downstreamResources) to it. The key
// protects nothing at rest: a new state dir just makes a new key, which
// the next heartbeat publishes.
func openAgentKey(stateDir string, logger *zap.Logger) (*seal.Opener, error) {
	dir := filepath.Join(stateDir, agentKeyDir)
	ring, created, err := keyring.LoadOrCreate(dir)
	if err != nil {
		return nil, fmt.Errorf("agent key: %w", err)
	}
	if created {
		logger.Info("Generated the agent's sealing key", zap.String("keyID", ring.Newest().ID))
	}
	return seal.NewOpener(ring)
}
