package activities

import (
	"context"
	"fmt"
	"os"

	"go.temporal.io/sdk/activity"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/dirarchive"
)

// RenderArchiveInput renders a directory sent as an archive (`flotilla
// plan --path DIR`) in place of the GitRepo's tree at Commit.
type RenderArchiveInput struct {
	RenderInput
	// Archive is a gzipped tar (dirarchive.Pack), bounded by
	// dirarchive.MaxCompressed and MaxUnpacked.
	Archive []byte `json:"archive"`
}

// RenderArchive unpacks in.Archive into a temporary directory and renders
// its bundles as Render does a checkout's (the GitRepo's paths or
// bundles entries, its options). An archive that is too large or holds
// an unsafe entry is a non-retryable ErrTypeInvalidBundle naming it.
func (a *Activities) RenderArchive(ctx context.Context, in RenderArchiveInput) (RenderResult, error) {
	defer keepAlive(ctx)()
	dir, err := os.MkdirTemp("", "flotilla-plan-")
	if err != nil {
		return RenderResult{}, fmt.Errorf("unpack the plan's archive: %w", err)
	}
	defer os.RemoveAll(dir)
	// Whatever the archive holds that cannot be unpacked (an unsafe
	// entry, too much, not a gzipped tar) will not unpack on a retry.
	if err := dirarchive.Unpack(in.Archive, dir); err != nil {
		return RenderResult{}, invalidBundle(in.GitRepo, fmt.Errorf("--path archive: %w", err))
	}
	locs, err := bundle.Locate(dir, in.Spec.EffectivePaths(), in.Spec.Bundles)
	if err != nil {
		return RenderResult{}, invalidBundle(in.GitRepo, err)
	}
	return a.renderDir(ctx, in.RenderInput, dir, locs, func(step string) { activity.RecordHeartbeat(ctx, step) })
}
