package chartfetch

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"
	"sigs.k8s.io/yaml"
)

// maxLocalDepth bounds how deep file:// dependencies of file://
// dependencies are followed, which also stops cycles.
const maxLocalDepth = 10

// BuildDependencies makes a chart's dependencies available, like
// `helm dependency build`. files are one chart's files with names relative
// to the chart root ("Chart.yaml", "templates/x.yaml", "charts/...").
//
// Every dependency in Chart.yaml (apiVersion v2) or requirements.yaml (v1)
// that is not vendored under charts/ (as a directory charts/<name>/ with a
// Chart.yaml, or as an archive charts/<name>-<version>.tgz whose version
// satisfies the dependency's) is downloaded and added as
// charts/<name>-<version>.tgz. A version locked in Chart.lock
// (requirements.lock) takes the place of the constraint. Repositories may
// be Helm repositories (http:// or https://, resolved through index.yaml),
// OCI registries (oci://) or "file://<path>" directories relative to the
// chart, whose files local returns for a slash path such as "../sibling";
// such local charts get their own dependencies built, are filtered by
// their .helmignore and are packed into a reproducible archive. Repository
// aliases ("@name", "alias:name") cannot be resolved without Helm's
// repository configuration and are an error. Dependencies that a condition
// or tags would disable are fetched all the same, as Helm does.
//
// It returns the chart's files plus the added archives, sorted by name; the
// input is returned unchanged when nothing needs fetching.
func (f *Fetcher) BuildDependencies(ctx context.Context, files []File, local func(path string) ([]File, error)) ([]File, error) {
	return f.buildDeps(ctx, files, local, "", 0)
}

// buildDeps builds the dependencies of the chart whose root is at dir
// (a slash path relative to the outermost chart, "" for that chart itself).
func (f *Fetcher) buildDeps(ctx context.Context, files []File, local func(string) ([]File, error), dir string, depth int) ([]File, error) {
	byName := make(map[string][]byte, len(files))
	for _, file := range files {
		byName[file.Name] = file.Data
	}
	md, deps, lock, err := readDependencies(byName)
	if err != nil {
		return nil, fmt.Errorf("chartfetch: chart %s: %w", chartDirName(dir), err)
	}
	if len(deps) == 0 {
		return files, nil
	}
	locked := map[string]string{}
	if lock != nil {
		for _, d := range lock.Dependencies {
			if d != nil {
				locked[d.Name+"\x00"+d.Repository] = d.Version
			}
		}
	}
	out := append([]File(nil), files...)
	added := false
	for _, d := range deps {
		if d == nil {
			continue
		}
		version := strings.TrimSpace(d.Version)
		if v := locked[d.Name+"\x00"+d.Repository]; v != "" {
			version = v
		}
		if isVendored(byName, d.Name, version) {
			continue
		}
		data, meta, err := f.fetchDependency(ctx, d, version, local, dir, depth)
		if err != nil {
			return nil, fmt.Errorf("chartfetch: chart %s: dependency %q (repository %q): %w",
				chartName(md, dir), d.Name, redactURL(d.Repository), err)
		}
		name := "charts/" + d.Name + "-" + meta.Version + ".tgz"
		if _, ok := byName[name]; ok {
			continue
		}
		byName[name] = data
		out = append(out, File{Name: name, Data: data})
		added = true
	}
	if !added {
		return files, nil
	}
	sortFiles(out)
	return out, nil
}

// readDependencies reads the dependencies of a chart and its lock file.
func readDependencies(byName map[string][]byte) (*chart.Metadata, []*chart.Dependency, *chart.Lock, error) {
	raw, ok := byName["Chart.yaml"]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: no Chart.yaml", ErrInvalidArchive)
	}
	var md chart.Metadata
	if err := yaml.Unmarshal(raw, &md); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: Chart.yaml: %w", ErrInvalidArchive, err)
	}
	deps, lockFile := md.Dependencies, "Chart.lock"
	if md.APIVersion == "" || md.APIVersion == chart.APIVersionV1 {
		lockFile = "requirements.lock"
		if req, ok := byName["requirements.yaml"]; ok {
			var r struct {
				Dependencies []*chart.Dependency `json:"dependencies"`
			}
			if err := yaml.Unmarshal(req, &r); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: requirements.yaml: %w", ErrInvalidArchive, err)
			}
			deps = r.Dependencies
		}
	}
	var lock *chart.Lock
	if raw, ok := byName[lockFile]; ok {
		lock = &chart.Lock{}
		if err := yaml.Unmarshal(raw, lock); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalidArchive, lockFile, err)
		}
	}
	return &md, deps, lock, nil
}

// isVendored reports whether a dependency is present under charts/, as a
// directory with a Chart.yaml or as an archive of a matching version.
func isVendored(byName map[string][]byte, name, version string) bool {
	if _, ok := byName["charts/"+name+"/Chart.yaml"]; ok {
		return true
	}
	var constraint *semver.Constraints
	if version != "" {
		constraint, _ = semver.NewConstraint(version)
	}
	prefix := "charts/" + name + "-"
	for file := range byName {
		if !strings.HasPrefix(file, prefix) || !strings.HasSuffix(file, ".tgz") {
			continue
		}
		v := strings.TrimSuffix(strings.TrimPrefix(file, prefix), ".tgz")
		if strings.Contains(v, "/") {
			continue
		}
		sv, err := semver.NewVersion(v)
		if err != nil {
			continue
		}
		if version == "" || v == version || (constraint != nil && constraint.Check(sv)) {
			return true
		}
	}
	return false
}

// fetchDependency downloads (or packs) one dependency and reads its
// Chart.yaml.
func (f *Fetcher) fetchDependency(ctx context.Context, d *chart.Dependency, version string,
	local func(string) ([]File, error), dir string, depth int) ([]byte, *chart.Metadata, error) {
	repoURL := strings.TrimSpace(d.Repository)
	var (
		data []byte
		err  error
	)
	switch scheme := schemeOf(repoURL); {
	case repoURL == "":
		return nil, nil, fmt.Errorf("%w: not vendored under charts/ and no repository given", ErrNotFound)
	case strings.HasPrefix(repoURL, "@") || strings.HasPrefix(repoURL, "alias:"):
		return nil, nil, fmt.Errorf("%w: repository aliases need Helm's repository configuration; give the repository URL instead", ErrUnsupportedSource)
	case scheme == "file":
		return f.packLocal(ctx, d, version, local, dir, depth)
	case scheme == "http" || scheme == "https" || scheme == "oci":
		data, err = f.fetchArchive(ctx, Source{Chart: d.Name, Repo: repoURL, Version: version})
		if err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("%w: repository must be an http://, https://, oci:// or file:// URL", ErrUnsupportedSource)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidArchive, err)
	}
	if ch.Metadata.Name != d.Name {
		return nil, nil, fmt.Errorf("%w: the downloaded chart is named %q", ErrInvalidArchive, ch.Metadata.Name)
	}
	return data, ch.Metadata, nil
}

// packLocal packs a file:// dependency after building its own dependencies.
func (f *Fetcher) packLocal(ctx context.Context, d *chart.Dependency, version string,
	local func(string) ([]File, error), dir string, depth int) ([]byte, *chart.Metadata, error) {
	if local == nil {
		return nil, nil, fmt.Errorf("%w: no way to read local charts was given", ErrUnsupportedSource)
	}
	if depth >= maxLocalDepth {
		return nil, nil, fmt.Errorf("%w: file:// dependencies nested more than %d deep (a cycle?)", ErrUnsupportedSource, maxLocalDepth)
	}
	p := path.Join(dir, strings.TrimPrefix(strings.TrimSpace(d.Repository), "file://"))
	files, err := local(p)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", p, err)
	}
	files, err = f.buildDeps(ctx, files, local, p, depth+1)
	if err != nil {
		return nil, nil, err
	}
	files, err = applyHelmignore(files)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	byName := make(map[string][]byte, len(files))
	for _, file := range files {
		byName[file.Name] = file.Data
	}
	md, _, _, err := readDependencies(byName)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	if md.Name != d.Name {
		return nil, nil, fmt.Errorf("%w: the chart at %s is named %q", ErrInvalidArchive, p, md.Name)
	}
	if version != "" && version != md.Version {
		c, err := semver.NewConstraint(version)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: version %q is neither a version nor a constraint: %w", ErrUnsupportedSource, version, err)
		}
		v, err := semver.NewVersion(md.Version)
		if err != nil || !c.Check(v) {
			return nil, nil, fmt.Errorf("the chart at %s does not match version %q (available: %s): %w", p, version, md.Version, ErrNotFound)
		}
	}
	data, err := packChart(md.Name, files)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	if _, err := loader.LoadArchive(bytes.NewReader(data)); err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", p, ErrInvalidArchive, err)
	}
	return data, md, nil
}

// applyHelmignore drops the files that the chart's .helmignore (and Helm's
// default rules) exclude from a packaged chart.
func applyHelmignore(files []File) ([]File, error) {
	rules := ignore.Empty()
	for _, file := range files {
		if file.Name == ".helmignore" {
			r, err := ignore.Parse(bytes.NewReader(file.Data))
			if err != nil {
				return nil, fmt.Errorf(".helmignore: %w", err)
			}
			rules = r
		}
	}
	rules.AddDefaults()
	kept := files[:0:0]
	for _, file := range files {
		if !ignored(rules, file.Name) {
			kept = append(kept, file)
		}
	}
	return kept, nil
}

// ignored reports whether rules exclude a file or one of its directories.
func ignored(rules *ignore.Rules, name string) bool {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if rules.Ignore(dir, fileInfo{name: parts[i-1], dir: true}) {
			return true
		}
	}
	return rules.Ignore(name, fileInfo{name: parts[len(parts)-1]})
}

// fileInfo is the little of fs.FileInfo that ignore.Rules looks at.
type fileInfo struct {
	name string
	dir  bool
}

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64  { return 0 }
func (fi fileInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.dir }
func (fi fileInfo) Sys() any           { return nil }

func chartDirName(dir string) string {
	if dir == "" {
		return "(root)"
	}
	return dir
}

func chartName(md *chart.Metadata, dir string) string {
	if md != nil && md.Name != "" {
		return fmt.Sprintf("%q", md.Name)
	}
	return chartDirName(dir)
}
