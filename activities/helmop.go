package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// ErrTypeChart: a HelmOp's chart repository or registry refused the
// credentials, or holds no version matching the HelmOp's.
const ErrTypeChart = "Chart"

// archiveVersion is the "commit" of a HelmOp whose chart is an archive
// URL: it has no version, and it is never polled.
const archiveVersion = "archive"

// resolveChart resolves a HelmOp's version once, centrally, so every
// cluster gets the same one: a constraint against the repository's
// index.yaml or the registry's tags (fresh: no cached index), an exact
// version as it is. The version stands for the commit in the GitRepo
// machinery.
func (a *Activities) resolveChart(ctx context.Context, in ResolveInput) (ResolveResult, error) {
	chart, repo, version := in.Spec.HelmOp.Chart()
	f, err := a.fetcher(in.GitRepo, in.Spec)
	if err != nil {
		return ResolveResult{}, err
	}
	f.IndexTTL = -1 // a poll asks the repository, not the cache
	v, err := f.ResolveVersion(ctx, chartfetch.Source{Chart: chart, Repo: repo, Version: version})
	if err != nil {
		return ResolveResult{}, chartError(in.GitRepo, err)
	}
	if v == "" {
		v = archiveVersion
	}
	return ResolveResult{Ref: version, Commit: v}, nil
}

// chartError classifies a chart repository's failure: refused
// credentials, no matching version and an index.yaml over its size limit
// are the HelmOp's to fix (non-retryable, naming it); anything else is
// tried again.
func chartError(ref GitRepoRef, err error) error {
	msg := fmt.Sprintf("%s: %v", ref.Title(), err)
	switch {
	case errors.Is(err, chartfetch.ErrAuth), errors.Is(err, chartfetch.ErrNotFound), errors.Is(err, chartfetch.ErrUnsupportedSource),
		errors.Is(err, sizelimit.ErrTooLarge):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeChart, nil)
	}
	return temporal.NewApplicationError(msg, ErrTypeChart)
}

// helmOpDir writes the HelmOp's bundle as the fleet.yaml of a new
// directory, at the resolved version, and returns the directory (the
// caller removes it). The file's bytes depend only on the spec and the
// version, so the manifest ID does too.
func helmOpDir(src *api.HelmOpSource, version string) (string, error) {
	var fy map[string]any
	if err := json.Unmarshal(src.Bundle, &fy); err != nil {
		return "", err
	}
	if fy == nil {
		fy = map[string]any{}
	}
	fy["name"] = src.Name
	if len(src.Labels) > 0 {
		fy["labels"] = src.Labels
	}
	if helm, ok := fy["helm"].(map[string]any); ok && version != archiveVersion {
		helm["version"] = version
	}
	data, err := json.Marshal(fy)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "flotilla-helmop-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), append(data, '\n'), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
