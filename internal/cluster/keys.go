package cluster

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// PublishedKeys returns every public key the controllers published, with
// their signatures, oldest first: what the CLI checks (package sealtrust)
// before it seals to the newest. ErrNoKeys when there is none.
func PublishedKeys(ctx context.Context, c client.Client) ([]seal.PublicKey, error) {
	var rec protocol.KeysRecord
	found, err := queryOpen(ctx, c, protocol.KeysID, protocol.QueryStatus, &rec)
	if err != nil {
		return nil, fmt.Errorf("read the controllers' sealing keys: %w", err)
	}
	if !found || len(rec.Keys) == 0 {
		return nil, ErrNoKeys
	}
	return rec.Keys, nil
}
