package applier

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/policy"
)

// applyPolicy stores a GitRepoRestriction or Policy (internal/policy).
func applyPolicy(ctx context.Context, c client.Client, queue string, d api.Document) (string, error) {
	return policy.ApplyDocument(ctx, c, queue, d)
}

// deletePolicy removes a GitRepoRestriction or Policy (internal/policy).
func deletePolicy(ctx context.Context, c client.Client, queue, kind, namespace, name string) error {
	err := policy.DeleteDocument(ctx, c, queue, kind, namespace, name)
	if errors.Is(err, policy.ErrNotFound) {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, ErrNotFound)
	}
	return err
}
