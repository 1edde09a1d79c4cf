package bundle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// Read reads the bundle in dir (slash-separated, relative to root) of the
// repository named repoName checked out at root, and returns it with its
// manifest.
//
// fleet.yaml (or fleet.yml) is optional; keys Read does not know are
// ignored, as Fleet ignores them, and listed in Bundle.Warnings. Problems
// with the repository content (YAML syntax, a key given twice, wrong
// types, an invalid release name, namespace, label or annotation, a remote
// chart, a missing chart directory or values file, a path leaving the
// repository) are returned as *ValidationError naming the bundle, the file
// and the key.
//
// helm.valuesFiles are merged into Options.Helm.Values at read time, in
// Fleet's order: inline values first, then each file on top (later files
// win, maps merge deeply). The helm.valuesFiles of each target and target
// customization are merged into that customization's helm.values the same
// way (per-cluster targeting then merges those over the bundle's values),
// and are not resources either.
//
// The manifest holds every file under dir except hidden files and
// directories, files excluded by .fleetignore, the bundle's own
// fleet.yaml/fleet.yml and its values files. Subdirectories that are
// bundles of their own are included, their fleet.yaml too, exactly as
// Fleet does (see reader.manifest for why). A local chart outside dir is
// added under ".chart/<directory name>/". Files that are not UTF-8 are
// base64-encoded. A bundle with no files is not an error here.
//
// Read does not check that the files are Kubernetes objects or that a chart
// renders; Chart does part of that.
func Read(root, dir, repoName string) (Bundle, Manifest, error) {
	return (&Reader{}).Read(context.Background(), root, dir, repoName)
}

// Reader reads bundles, fetching remote charts with Charts.
type Reader struct {
	// Charts downloads remote charts and chart dependencies. Nil: a
	// bundle with a remote chart is a *ValidationError wrapping
	// ErrUnsupported, and dependencies must be vendored.
	Charts *chartfetch.Fetcher
	// Limits bound the repository files Read reads. Optional: zero
	// fields take their defaults.
	Limits Limits
}

// Read is the package-level Read with remote charts: every distinct remote
// chart of the bundle (helm.chart/repo/version, also as set by
// targetCustomizations) is fetched and embedded under
// ".chart/<chartfetch.Checksum>/", as Fleet embeds it, so the manifest
// holds everything a cluster needs. Local charts whose Chart.yaml lists
// dependencies that are not vendored get them built into charts/, unless
// helm.disableDependencyUpdate is set.
func (r *Reader) Read(ctx context.Context, root, dir, repoName string) (Bundle, Manifest, error) {
	return r.ReadLocation(ctx, root, Location{Dir: dir}, repoName)
}

// ReadLocation is Read for a bundle Locate found. With loc.Options set
// (an entry of a GitRepo's bundles, as fleet apply --driven-scan reads
// it), that file, relative to loc.Dir, is the bundle's fleet.yaml: Dir's
// own fleet.yaml is neither read nor a resource; the options file is not
// a resource either; and the bundle's default name is Fleet's
// <repoName>/<Dir>/<Options without extension>, made a release name.
func (r *Reader) ReadLocation(ctx context.Context, root string, loc Location, repoName string) (Bundle, Manifest, error) {
	rp, err := openRepo(root)
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	files := r.Limits.files()
	rd := &reader{ctx: ctx, charts: r.Charts, repo: rp, ig: newIgnorer(rp, files), files: files}
	b, m, err := rd.read(loc, repoName)
	// Errors from helpers that do not know the bundle (.fleetignore) get
	// its name here.
	var ve *ValidationError
	if errors.As(err, &ve) && ve.Bundle == "" {
		ve.Bundle = rd.name
	}
	return b, m, err
}

// locate sets the bundle's directory, options file and default name
// (Fleet's: the repository name, the directory and, for a bundles entry
// with an options file, its name without extension).
func (rd *reader) locate(loc Location, repoName string) error {
	var err error
	if rd.dir, err = cleanRel(loc.Dir); err != nil {
		return &ValidationError{Path: loc.Dir, Err: err}
	}
	id := path.Join(repoName, rd.dir)
	if loc.Options != "" {
		if rd.optionsPath, err = cleanRel(path.Join(rd.dir, loc.Options)); err != nil {
			return &ValidationError{Path: path.Join(rd.dir, loc.Options), Err: err}
		}
		id = path.Join(id, strings.TrimSuffix(loc.Options, path.Ext(loc.Options)))
	}
	rd.name = fleetyaml.ReleaseName(id)
	return nil
}

func (rd *reader) read(loc Location, repoName string) (Bundle, Manifest, error) {
	if err := rd.locate(loc, repoName); err != nil {
		return Bundle{}, Manifest{}, err
	}
	if err := rd.checkDir(); err != nil {
		return Bundle{}, Manifest{}, err
	}
	fy, warnings, err := rd.readOptionsFile()
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	if fy.Name != "" && validation.IsDNS1123Subdomain(fy.Name) == nil {
		rd.name = fy.Name
	}
	if err := rd.validate(&fy); err != nil {
		return Bundle{}, Manifest{}, err
	}
	opts, exclude, chartDir, err := rd.options(fy)
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	spec := fy.Spec
	for _, list := range []struct {
		field   string
		targets *[]Target
	}{{"targets", &spec.Targets}, {"targetCustomizations", &spec.TargetCustomizations}} {
		if *list.targets, err = rd.targetValues(list.field, *list.targets, exclude); err != nil {
			return Bundle{}, Manifest{}, err
		}
	}
	propagateChart(opts.Helm, spec.TargetCustomizations)
	propagateChart(opts.Helm, spec.Targets)
	m, err := rd.manifest(exclude, chartDir)
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	if m, err = rd.remoteCharts(m, opts, spec); err != nil {
		return Bundle{}, Manifest{}, err
	}
	if m, err = rd.dependencies(m, opts, chartDir); err != nil {
		return Bundle{}, Manifest{}, err
	}
	b := Bundle{
		Name:          rd.name,
		Dir:           rd.dir,
		ManifestID:    m.ID(),
		Options:       opts,
		Spec:          spec,
		Labels:        fy.Labels,
		Annotations:   fy.Annotations,
		Type:          typeOf(opts, m, chartDir),
		ResourceCount: len(m.Resources),
	}
	if b.Type == "yaml" {
		warnings = append(warnings, rawWarnings(b, m)...)
	}
	b.Warnings = warnings
	return b, m, nil
}

// reader holds the state of one Read.
type reader struct {
	ctx    context.Context
	charts *chartfetch.Fetcher
	repo   repo
	ig     *ignorer
	// files reads the repository's files within the limits.
	files *fileReader
	// dir is the bundle directory, name the bundle name (final once
	// fleet.yaml is parsed) and file the options file ("" when none).
	dir, name, file string
	// optionsPath is the options file a GitRepo's bundles entry names, a
	// repository path ("" to look for fleet.yaml in dir).
	optionsPath string
}

// invalid returns a validation error about a key of the options file.
func (rd *reader) invalid(field string, err error) error {
	return &ValidationError{Bundle: rd.name, Path: rd.file, Field: field, Err: err}
}

// checkDir checks that the bundle directory exists inside the repository
// and is not reached through a symbolic link.
func (rd *reader) checkDir() error {
	target, fi, err := rd.repo.resolve(rd.dir)
	switch {
	case errors.Is(err, ErrOutsideRepo):
		return &ValidationError{Bundle: rd.name, Path: rd.dir, Err: err}
	case err != nil:
		return fmt.Errorf("bundle %s: %w", rd.name, err)
	case !fi.IsDir():
		return &ValidationError{Bundle: rd.name, Path: rd.dir, Err: errors.New("not a directory")}
	case target != rd.dir:
		return &ValidationError{Bundle: rd.name, Path: rd.dir, Err: fmt.Errorf("is a symbolic link to %s; read the target instead", target)}
	}
	return nil
}

// readOptionsFile reads fleet.yaml, if there is one, and returns it with
// a warning for each key it ignored.
func (rd *reader) readOptionsFile() (fleetYAML, []string, error) {
	var fy fleetYAML
	file, err := rd.optionsFile()
	if err != nil || file == "" {
		return fy, nil, err
	}
	rd.file = file
	if _, _, err := rd.repo.resolve(file); err != nil {
		return fy, nil, rd.invalidOrIO("", err)
	}
	data, err := rd.readFile(file)
	if err != nil {
		return fy, nil, err
	}
	fy, field, unknown, err := decodeFleetYAML(data)
	if err != nil {
		return fy, nil, rd.invalid(field, err)
	}
	var warnings []string
	for _, k := range unknown {
		warnings = append(warnings, fmt.Sprintf("%s: unknown field %q (ignored)", file, k))
	}
	if len(fy.CorrectionWindows) > 0 {
		fy.CorrectionWindows = nil
		warnings = append(warnings, fmt.Sprintf("%s: correctionWindows: ignored; drift is corrected inside rolloutStrategy.windows", file))
	}
	if len(fy.ImageScans) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: imageScans: not acted on (Flotilla does not write to Git)", file))
	}
	return fy, warnings, nil
}

// optionsFile returns the repository path of the bundle's options file:
// the one its bundles entry names, which must exist, or dir's fleet.yaml
// or fleet.yml ("" when there is none).
func (rd *reader) optionsFile() (string, error) {
	if rd.optionsPath == "" {
		return rd.repo.optionsFileIn(rd.dir)
	}
	if _, fi, err := rd.repo.resolve(rd.optionsPath); err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			err = errors.New("not a regular file")
		}
		return "", &ValidationError{Bundle: rd.name, Path: rd.optionsPath, Err: fmt.Errorf("options file: %w", err)}
	}
	return rd.optionsPath, nil
}

// options validates fleet.yaml's settings and returns the Options, the
// bundle-relative names of files to leave out of the manifest, and the
// repo path of a local chart directory ("" when none).
func (rd *reader) options(fy fleetYAML) (Options, map[string]bool, string, error) {
	opts := fy.Options
	exclude := map[string]bool{optionsFile: true, optionsFileFallback: true}
	if rd.optionsPath != "" && withinDir(rd.dir, rd.optionsPath) {
		exclude[relTo(rd.dir, rd.optionsPath)] = true
	}
	if opts.Helm == nil {
		return opts, exclude, "", nil
	}
	h := *opts.Helm
	chartDir := ""
	if !chartfetch.IsRemote(chartfetch.Source{Chart: h.Chart, Repo: h.Repo, Version: h.Version}) {
		var err error
		if chartDir, err = rd.chartDir(h.Chart); err != nil {
			return Options{}, nil, "", err
		}
	}
	values, inBundle, err := rd.helmValues("", &h, "")
	if err != nil {
		return Options{}, nil, "", err
	}
	h.Values = values
	for _, name := range inBundle {
		exclude[name] = true
	}
	opts.Helm = &h
	return opts, exclude, chartDir, nil
}

// propagateChart copies the bundle's chart, repo and version into
// customizations that set helm options but not those, as Fleet does, so
// a customization changing only the version fetches the same chart.
func propagateChart(base *HelmOptions, targets []Target) {
	if base == nil {
		return
	}
	for i := range targets {
		h := targets[i].Helm
		if h == nil {
			continue
		}
		c := *h
		if c.Chart == "" {
			c.Chart = base.Chart
		}
		if c.Repo == "" {
			c.Repo = base.Repo
		}
		if c.Version == "" {
			c.Version = base.Version
		}
		targets[i].Helm = &c
	}
}

func (rd *reader) checkLabels(field string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(labels[k])...)
		if len(errs) > 0 {
			return rd.invalid(field+"."+k, fmt.Errorf("invalid label %q: %q: %s", k, labels[k], strings.Join(errs, "; ")))
		}
	}
	return nil
}

// chartDir checks a local helm.chart and returns its repo path.
func (rd *reader) chartDir(chart string) (string, error) {
	if chart == "" {
		return "", nil
	}
	rel, err := rd.localPath("helm.chart", chart)
	if err != nil {
		return "", err
	}
	target, fi, err := rd.repo.resolve(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", rd.invalid("helm.chart", fmt.Errorf("chart directory %s does not exist", rel))
	case err != nil:
		return "", rd.invalidOrIO("helm.chart", err)
	case !fi.IsDir():
		return "", rd.invalid("helm.chart", fmt.Errorf("chart %s is not a directory", rel))
	case target != rel:
		return "", rd.invalid("helm.chart", fmt.Errorf("chart directory %s is a symbolic link, which is not supported", rel))
	}
	if withinDir(rd.dir, rel) && slices.ContainsFunc(strings.Split(relTo(rd.dir, rel), "/"), isHidden) {
		return "", rd.invalid("helm.chart", fmt.Errorf("chart directory %s is hidden, and hidden files are not part of a bundle", rel))
	}
	if fi, err := os.Stat(rd.repo.abs(path.Join(rel, "Chart.yaml"))); err != nil || !fi.Mode().IsRegular() {
		return "", rd.invalid("helm.chart", fmt.Errorf("chart directory %s has no Chart.yaml", rel))
	}
	return rel, nil
}

// typeOf names how a bundle deploys: through a chart, a kustomization,
// both, or as plain YAML.
func typeOf(opts Options, m Manifest, chartDir string) string {
	helm := chartDir != "" || (opts.Helm != nil && opts.Helm.Chart != "")
	if _, ok := m.resource("Chart.yaml"); ok {
		helm = true
	}
	dir := "."
	if opts.Kustomize != nil && opts.Kustomize.Dir != "" {
		dir = path.Clean(opts.Kustomize.Dir)
	}
	// Fleet looks for kustomization.yaml only (bundlereader style.go).
	_, kustomize := m.resource(path.Join(dir, "kustomization.yaml"))
	switch {
	case helm && kustomize:
		return "helm+kustomize"
	case helm:
		return "helm"
	case kustomize:
		return "kustomize"
	}
	return "yaml"
}
