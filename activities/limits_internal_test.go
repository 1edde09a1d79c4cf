package activities

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// TestTooLargeIsNotRetried: content over a size limit fails the render
// or the HelmOp's resolve for good (the repository or the limit must
// change), while other Git and chart failures stay retryable.
func TestTooLargeIsNotRetried(t *testing.T) {
	ref := GitRepoRef{Namespace: "fleet-default", Name: "app"}
	over := sizelimit.Limit{Max: 1 << 20, Flag: sizelimit.CheckoutFlag}.Error("the commit's files together, up to big.bin")
	tests := []struct {
		name         string
		err          error
		nonRetryable bool
		errType      string
	}{
		{"checkout over the limit", gitError(ref, fmt.Errorf("check out abc: %w", over)), true, ErrTypeInvalidBundle},
		{"git server down", gitError(ref, errors.New("connection refused")), false, "Git"},
		{"index over the limit", chartError(ref, fmt.Errorf("%w: %w", chartfetch.ErrInvalidArchive, over)), true, ErrTypeChart},
		{"chart server down", chartError(ref, errors.New("connection refused")), false, ErrTypeChart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ae *temporal.ApplicationError
			require.ErrorAs(t, tt.err, &ae)
			assert.Equal(t, tt.nonRetryable, ae.NonRetryable())
			assert.Equal(t, tt.errType, ae.Type())
			if tt.nonRetryable {
				assert.Contains(t, ae.Error(), "over the limit of 1Mi (raise it with flotilla-worker --max-checkout-size)")
			}
		})
	}
}
