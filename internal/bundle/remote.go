package bundle

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// chartSource returns the chart source of helm options.
func chartSource(h *HelmOptions) chartfetch.Source {
	if h == nil {
		return chartfetch.Source{}
	}
	return chartfetch.Source{Chart: h.Chart, Repo: h.Repo, Version: h.Version}
}

// remoteCharts fetches every distinct remote chart the bundle names (its
// own and its customizations') and adds its files to m under
// ".chart/<checksum>/", as Fleet does.
func (rd *reader) remoteCharts(m Manifest, opts Options, spec Spec) (Manifest, error) {
	type named struct {
		field string
		src   chartfetch.Source
		noDep bool
	}
	var srcs []named
	add := func(field string, h *HelmOptions, base *HelmOptions) {
		src := chartSource(h)
		if h == nil || !chartfetch.IsRemote(src) {
			return
		}
		for _, s := range srcs {
			if s.src == src {
				return
			}
		}
		noDep := h.DisableDependencyUpdate || (base != nil && base.DisableDependencyUpdate)
		srcs = append(srcs, named{field: field, src: src, noDep: noDep})
	}
	add("helm.chart", opts.Helm, nil)
	for i, t := range spec.TargetCustomizations {
		add(fmt.Sprintf("targetCustomizations[%d].helm.chart", i), t.Helm, opts.Helm)
	}
	for i, t := range spec.Targets {
		add(fmt.Sprintf("targets[%d].helm.chart", i), t.Helm, opts.Helm)
	}
	if len(srcs) == 0 {
		return m, nil
	}
	res := slices.Clone(m.Resources)
	for _, s := range srcs {
		if rd.charts == nil {
			return m, rd.invalid(s.field, fmt.Errorf("%s: remote charts are %w here (no chart fetcher)", describe(s.src), ErrUnsupported))
		}
		c, err := rd.charts.Fetch(rd.ctx, s.src)
		if err != nil {
			return m, rd.chartError(s.field, s.src, err)
		}
		files := c.Files
		if !s.noDep {
			if files, err = rd.chartDependencies(s.field, files); err != nil {
				return m, err
			}
		}
		prefix := chartPrefix + chartfetch.Checksum(s.src) + "/"
		for _, f := range files {
			res = append(res, newResource(prefix+f.Name, f.Data))
		}
	}
	out := Manifest{Resources: res}
	sortResources(out.Resources)
	return out, nil
}

// chartDependencies builds the dependencies of a fetched chart, whose
// files sit under one top directory.
func (rd *reader) chartDependencies(field string, files []chartfetch.File) ([]chartfetch.File, error) {
	if len(files) == 0 {
		return files, nil
	}
	top, _, _ := strings.Cut(files[0].Name, "/")
	var inner []chartfetch.File
	for _, f := range files {
		inner = append(inner, chartfetch.File{Name: strings.TrimPrefix(f.Name, top+"/"), Data: f.Data})
	}
	built, err := rd.charts.BuildDependencies(rd.ctx, inner, func(string) ([]chartfetch.File, error) {
		return nil, errors.New("file:// dependencies of a downloaded chart are not available")
	})
	if err != nil {
		return nil, rd.invalidOrFetch(field, err)
	}
	out := make([]chartfetch.File, 0, len(built))
	for _, f := range built {
		out = append(out, chartfetch.File{Name: top + "/" + f.Name, Data: f.Data})
	}
	return out, nil
}

// dependencies builds the missing dependencies of the bundle's local chart
// into its charts/ directory.
func (rd *reader) dependencies(m Manifest, opts Options, chartDir string) (Manifest, error) {
	dir, ok := localChartDir(rd.dir, opts, m, chartDir)
	if !ok || (opts.Helm != nil && opts.Helm.DisableDependencyUpdate) {
		return m, nil
	}
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	cy, ok := m.resource(prefix + "Chart.yaml")
	if !ok || !strings.Contains(cy.Content, "dependencies") {
		if _, req := m.resource(prefix + "requirements.yaml"); !req {
			return m, nil
		}
	}
	var files []chartfetch.File
	for _, r := range m.Resources {
		if !strings.HasPrefix(r.Name, prefix) {
			continue
		}
		data, err := r.Data()
		if err != nil {
			return m, &ValidationError{Bundle: rd.name, Path: path.Join(rd.dir, r.Name), Err: err}
		}
		files = append(files, chartfetch.File{Name: strings.TrimPrefix(r.Name, prefix), Data: data})
	}
	if rd.charts == nil {
		// Offline: Helm names any dependency missing from charts/.
		return m, nil
	}
	built, err := rd.charts.BuildDependencies(rd.ctx, files, rd.localChartFiles(path.Join(rd.dir, dir)))
	if err != nil {
		return m, rd.invalidOrFetch("helm.chart", err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f.Name] = true
	}
	res := slices.Clone(m.Resources)
	for _, f := range built {
		if !have[f.Name] {
			res = append(res, newResource(prefix+f.Name, f.Data))
		}
	}
	out := Manifest{Resources: res}
	sortResources(out.Resources)
	return out, nil
}

// localChartFiles reads a file:// dependency: the files of the chart
// directory at chartRoot/rel, relative to that directory.
func (rd *reader) localChartFiles(chartRoot string) func(string) ([]chartfetch.File, error) {
	return func(rel string) ([]chartfetch.File, error) {
		dir, err := cleanRel(path.Join(chartRoot, rel))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", rel, ErrOutsideRepo)
		}
		res, err := rd.collect(dir, "", nil)
		if err != nil {
			return nil, err
		}
		out := make([]chartfetch.File, 0, len(res))
		for _, r := range res {
			data, err := r.Data()
			if err != nil {
				return nil, err
			}
			out = append(out, chartfetch.File{Name: r.Name, Data: data})
		}
		return out, nil
	}
}

// localChartDir returns the manifest directory of the bundle's local chart.
func localChartDir(bundleDir string, opts Options, m Manifest, chartDir string) (string, bool) {
	if chartDir != "" {
		return chartManifestPath(bundleDir, chartDir), true
	}
	if opts.Helm != nil && chartfetch.IsRemote(chartSource(opts.Helm)) {
		return "", false
	}
	if _, ok := m.resource("Chart.yaml"); ok {
		return ".", true
	}
	return "", false
}

// chartError turns a fetch failure into a validation error when retrying
// cannot help (no such chart or version, bad checksum, unsupported source,
// refused credentials, over a size limit) and a plain, retryable error
// otherwise.
func (rd *reader) chartError(field string, src chartfetch.Source, err error) error {
	return rd.invalidOrFetch(field, fmt.Errorf("%s: %w", describe(src), err))
}

func (rd *reader) invalidOrFetch(field string, err error) error {
	for _, permanent := range []error{chartfetch.ErrNotFound, chartfetch.ErrChecksum, chartfetch.ErrUnsupportedSource, chartfetch.ErrAuth, ErrOutsideRepo, sizelimit.ErrTooLarge} {
		if errors.Is(err, permanent) {
			return rd.invalid(field, err)
		}
	}
	return fmt.Errorf("bundle %s: %s: %s: %w", rd.name, rd.file, field, err)
}

// describe names a chart source for messages.
func describe(src chartfetch.Source) string {
	s := "chart " + api.RedactURL(src.Chart)
	if src.Repo != "" {
		s += " from " + api.RedactURL(src.Repo)
	}
	if src.Version != "" {
		s += " version " + src.Version
	}
	return s
}
