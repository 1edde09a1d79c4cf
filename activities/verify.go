package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// verify checks the signatures spec.verify asks for on ref's commit (and
// tag). verified names the key; rejected says why the commit must not be
// deployed; err is a failure to check (retried, or non-retryable for a
// missing Secret).
func (a *Activities) verify(ctx context.Context, r gitsource.Remote, in ResolveInput, ref gitsource.Ref) (verified string, rejected *Rejection, err error) {
	return "", nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: spec.verify is not supported yet", in.GitRepo.Title()), ErrTypeInvalidBundle, nil)
}
