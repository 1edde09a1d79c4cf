package applier

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// applyPolicy stores a GitRepoRestriction or Policy (internal/policy).
func applyPolicy(_ context.Context, _ client.Client, _ string, d api.Document) (string, error) {
	return "", errPolicyUnsupported(d.Kind())
}

// deletePolicy removes a GitRepoRestriction or Policy (internal/policy).
func deletePolicy(_ context.Context, _ client.Client, _, kind, _, _ string) error {
	return errPolicyUnsupported(kind)
}
