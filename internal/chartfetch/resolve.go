package chartfetch

import (
	"context"
	"fmt"
	"strings"
)

// ResolveVersion returns the version a fetch of src would install now,
// asking the repository (its index.yaml, not older than IndexTTL) or the
// registry (its tags) without downloading a chart: an exact version is
// returned as it is, a constraint or an empty version resolves to the
// newest match. A chart archive URL has no version: "" is returned. Errors
// wrap ErrNotFound, ErrAuth or ErrUnsupportedSource where that is the
// cause.
func (f *Fetcher) ResolveVersion(ctx context.Context, src Source) (string, error) {
	v, err := f.resolveVersion(ctx, src)
	if err != nil {
		return "", fmt.Errorf("chartfetch: %s: %w", src, err)
	}
	return v, nil
}

func (f *Fetcher) resolveVersion(ctx context.Context, src Source) (string, error) {
	chart := strings.TrimSpace(src.Chart)
	repoURL := strings.TrimSpace(src.Repo)
	version := strings.TrimSpace(src.Version)
	if isExactVersion(version) {
		return version, nil
	}
	switch {
	case repoURL != "" && schemeOf(repoURL) == "oci":
		return f.resolveOCI(ctx, strings.TrimSuffix(repoURL, "/")+"/"+chart, version)
	case repoURL != "":
		idx, err := f.repoIndex(ctx, repoURL, f.auth(repoURL))
		if err != nil {
			return "", err
		}
		cv, err := findInIndex(idx, repoURL, chart, version)
		if err != nil {
			return "", err
		}
		return cv.Version, nil
	case schemeOf(chart) == "oci":
		return f.resolveOCI(ctx, chart, version)
	}
	return version, nil
}

// resolveOCI picks the tag of ref (oci://host/path/name[:tag]) that
// version selects.
func (f *Fetcher) resolveOCI(ctx context.Context, ref, version string) (string, error) {
	base, tag, digest, err := splitOCIRef(ref)
	if err != nil {
		return "", err
	}
	if tag != "" || digest != "" {
		return tag, nil
	}
	a := f.auth(base)
	repoRef, plainHTTP, err := f.ociRepository(base, a)
	if err != nil {
		return "", err
	}
	host, _, _ := strings.Cut(repoRef, "/")
	guard := &sizeGuard{limit: f.archiveLimit()}
	client, err := f.registryClient(ctx, host, a, plainHTTP, guard)
	if err != nil {
		return "", err
	}
	return ociRepo{base: base, ref: repoRef, client: client, maxArchive: f.maxArchive(), guard: guard}.resolveTag(ctx, version)
}
