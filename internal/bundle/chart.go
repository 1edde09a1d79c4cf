package bundle

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// rawDir is the chart directory, outside templates/, that holds a raw YAML
// bundle's files, so Helm never evaluates "{{ }}" in them.
const rawDir = "rawyaml/"

// rawTemplate is the only template of a raw YAML chart: it emits every file
// under rawDir verbatim, in name order, each as its own YAML document(s).
const rawTemplate = `{{- range $path, $_ := .Files.Glob "rawyaml/**" }}
---
{{ $.Files.Get $path }}
{{- end }}
`

// Chart builds the Helm chart that deploys bundle b with manifest m, the
// way Fleet's agent does:
//
//   - helm.chart set: the chart is that directory of the manifest (see
//     resources for where an outside chart lives in it);
//   - otherwise, a Chart.yaml at the top of the bundle makes the bundle
//     directory itself the chart (fleet-examples/single-cluster/helm);
//   - otherwise the bundle is raw YAML and gets a generated chart named
//     after the bundle, version "0.0.0+<12 hex digits of the manifest ID>".
//     Its *.yaml, *.yml and *.json files (as in Fleet) become chart files
//     under rawyaml/, emitted verbatim by one template, so "{{ }}" in them
//     is never templated. Left out, as in Fleet: fleet.yaml files, files
//     under a subdirectory holding its own fleet.yaml or Chart.yaml (nested
//     bundles and charts), overlays/ and .chart/. Also left out: kustomize
//     files, and documents without apiVersion and kind (Fleet's agent
//     skips those too).
//
// A raw YAML bundle with a kustomization.yaml at its top needs kustomize,
// which is ErrUnsupported for now. Chart does not set values: callers pass
// b.Options.Helm.Values to Helm. Problems with the content are returned as
// *ValidationError.
func Chart(b Bundle, m Manifest) (*chart.Chart, error) {
	if b.Dir == "" {
		b.Dir = "."
	}
	if dir, ok := chartDirOf(b, m); ok {
		return loadChart(b, m, dir)
	}
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, ok := m.resource(name); ok {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, name), Err: fmt.Errorf("kustomize bundles are %w", ErrUnsupported)}
		}
	}
	return rawChart(b, m)
}

// chartDirOf returns the manifest directory of the bundle's chart, if it
// has one.
func chartDirOf(b Bundle, m Manifest) (string, bool) {
	if h := b.Options.Helm; h != nil && h.Chart != "" {
		return chartManifestPath(b.Dir, path.Join(b.Dir, h.Chart)), true
	}
	if _, ok := m.resource("Chart.yaml"); ok {
		return ".", true
	}
	return "", false
}

func loadChart(b Bundle, m Manifest, dir string) (*chart.Chart, error) {
	where := path.Join(b.Dir, dir)
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var files []*loader.BufferedFile
	hasChartYAML := false
	for _, r := range m.Resources {
		if !strings.HasPrefix(r.Name, prefix) {
			continue
		}
		data, err := r.Data()
		if err != nil {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		name := strings.TrimPrefix(r.Name, prefix)
		hasChartYAML = hasChartYAML || name == "Chart.yaml"
		files = append(files, &loader.BufferedFile{Name: name, Data: data})
	}
	if !hasChartYAML {
		return nil, &ValidationError{Bundle: b.Name, Path: where, Err: errors.New("chart has no Chart.yaml")}
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, &ValidationError{Bundle: b.Name, Path: where, Err: fmt.Errorf("load chart: %w", err)}
	}
	return c, nil
}

func rawChart(b Bundle, m Manifest) (*chart.Chart, error) {
	files, err := rawFiles(b, m)
	if err != nil {
		return nil, err
	}
	c := &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion:  chart.APIVersionV2,
			Name:        chartName(b.Name),
			Version:     "0.0.0+" + strings.TrimPrefix(m.ID(), "s-")[:12],
			Description: "Raw YAML of bundle " + b.Name,
		},
		Templates: []*chart.File{{Name: "templates/rawyaml.yaml", Data: []byte(rawTemplate)}},
		Files:     files,
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("bundle %s: generated chart: %w", b.Name, err)
	}
	return c, nil
}

// rawFiles returns the chart files of a raw YAML bundle (see Chart).
func rawFiles(b Bundle, m Manifest) ([]*chart.File, error) {
	var skipDirs []string
	for _, r := range m.Resources {
		base, dir := path.Base(r.Name), path.Dir(r.Name)
		if dir != "." && (base == optionsFile || base == optionsFileFallback || base == "Chart.yaml") {
			skipDirs = append(skipDirs, dir+"/")
		}
	}
	var files []*chart.File
	for _, r := range m.Resources {
		if !isRawManifest(r.Name, skipDirs) {
			continue
		}
		data, err := r.Data()
		if err != nil {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		docs, err := objectDocuments(data)
		if err != nil {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		if len(docs) > 0 {
			files = append(files, &chart.File{Name: rawDir + r.Name, Data: docs})
		}
	}
	return files, nil
}

func isRawManifest(name string, skipDirs []string) bool {
	switch base := path.Base(name); {
	case base == optionsFile || base == optionsFileFallback:
		return false
	case base == "kustomization.yaml" || base == "kustomization.yml" || base == "Kustomization":
		return false
	case !isYAMLName(base) && path.Ext(base) != ".json":
		return false
	case strings.HasPrefix(name, "overlays/") || strings.HasPrefix(name, chartPrefix):
		return false
	}
	for _, d := range skipDirs {
		if strings.HasPrefix(name, d) {
			return false
		}
	}
	return true
}

// chartName turns a bundle name into a chart name: lower-case letters,
// digits, '-', '_' and '.', never empty.
func chartName(bundle string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, bundle)
	name = strings.Trim(name, "-_.")
	if name == "" {
		return "bundle"
	}
	return name
}
