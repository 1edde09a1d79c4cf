package bundle

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
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
// way Fleet's agent does (internal/bundlereader/style.go DetermineStyle and
// internal/helmdeployer/render/helm.go). b.Options are the options of the
// cluster being rendered for.
//
//   - helm.chart names a remote chart (helm.repo set, a URL, an oci://
//     reference or a go-getter source): the chart is the one the reader
//     embedded under ".chart/<sha256 of chart:repo:version>/", either
//     directly or in the single directory there that holds a Chart.yaml;
//   - helm.chart set otherwise: the chart is that directory of the manifest
//     (see resources for where an outside chart lives in it);
//   - otherwise, a Chart.yaml at the top of the bundle makes the bundle
//     directory itself the chart (fleet-examples/single-cluster/helm);
//   - otherwise, a kustomization.yaml in kustomize.dir (default the bundle
//     directory) makes it a kustomize bundle: the generated chart (below)
//     holds no files at all, since kustomize, run as Helm post-renderer by
//     NewKustomizer, builds every object, so nothing is emitted twice;
//   - otherwise the bundle is raw YAML. yaml.overlays are applied first
//     (only here, as in Fleet: helm and kustomize bundles ignore them).
//
// The generated chart is named after the bundle, version
// "0.0.0+<12 hex digits of the manifest ID>". Its *.yaml, *.yml and *.json
// files (as in Fleet) become chart files under rawyaml/, emitted verbatim
// by one template, so "{{ }}" in them is never templated. Left out, as in
// Fleet: fleet.yaml files, files under a subdirectory holding its own
// fleet.yaml or Chart.yaml (nested bundles and charts), overlays/ and
// .chart/. Also left out: kustomize files, and any file with a document
// that is not a Kubernetes object (no apiVersion or no kind): Fleet's agent
// skips such a file whole, and Read warns about it (Bundle.Warnings).
//
// Whatever the kind of chart, a kustomization in kustomize.dir post-renders
// Helm's output: see NewKustomizer. Chart does not set values: callers pass
// b.Options.Helm.Values to Helm. Problems with the content are returned as
// *ValidationError.
func Chart(b Bundle, m Manifest) (*chart.Chart, error) {
	if b.Dir == "" {
		b.Dir = "."
	}
	dir, ok, err := chartDirOf(b, m)
	if err != nil {
		return nil, err
	}
	if ok {
		return loadChart(b, m, dir)
	}
	id := m.ID()
	if _, ok := kustomizationOf(b, m); ok {
		return generatedChart(b, id, nil)
	}
	if m, err = applyOverlays(b, m); err != nil {
		return nil, err
	}
	files, err := rawFiles(b, m)
	if err != nil {
		return nil, err
	}
	return generatedChart(b, id, files)
}

// chartDirOf returns the manifest directory of the bundle's chart, if it
// has one.
func chartDirOf(b Bundle, m Manifest) (string, bool, error) {
	h := b.Options.Helm
	if h != nil && remoteChart(h) {
		dir, err := remoteChartDir(b, m)
		return dir, err == nil, err
	}
	if h != nil && h.Chart != "" {
		return chartManifestPath(b.Dir, path.Join(b.Dir, h.Chart)), true, nil
	}
	if _, ok := m.resource("Chart.yaml"); ok {
		return ".", true, nil
	}
	return "", false, nil
}

// remoteChart reports whether h names a chart to download rather than a
// directory of the bundle (chartfetch.IsRemote).
func remoteChart(h *HelmOptions) bool { return chartfetch.IsRemote(chartSource(h)) }

// remoteChartPrefix returns where the reader embeds the remote chart of h:
// ".chart/<chartfetch.Checksum>/", as Fleet's bundlereader does.
func remoteChartPrefix(h *HelmOptions) string {
	return chartPrefix + chartfetch.Checksum(chartSource(h)) + "/"
}

// remoteChartDir returns the manifest directory of the embedded remote
// chart: its prefix itself when Chart.yaml is right there, else the one
// directory below it holding a Chart.yaml (a chart archive's top
// directory), like Fleet's matchesExternalChartYAML.
func remoteChartDir(b Bundle, m Manifest) (string, error) {
	h := b.Options.Helm
	prefix := remoteChartPrefix(h)
	var dirs []string
	for _, r := range m.Resources {
		rest, ok := strings.CutPrefix(r.Name, prefix)
		if !ok {
			continue
		}
		switch parts := strings.Split(rest, "/"); {
		case len(parts) == 1 && parts[0] == "Chart.yaml":
			dirs = append(dirs, strings.TrimSuffix(prefix, "/"))
		case len(parts) == 2 && parts[1] == "Chart.yaml":
			dirs = append(dirs, prefix+parts[0])
		}
	}
	where := path.Join(b.Dir, strings.TrimSuffix(prefix, "/"))
	switch len(dirs) {
	case 0:
		return "", &ValidationError{Bundle: b.Name, Path: where, Field: "helm.chart",
			Err: fmt.Errorf("remote chart %s is not in the bundle: no Chart.yaml under %s", describeChart(h), prefix)}
	case 1:
		return dirs[0], nil
	default:
		return "", &ValidationError{Bundle: b.Name, Path: where, Field: "helm.chart",
			Err: fmt.Errorf("remote chart %s: more than one chart under %s: %s", describeChart(h), prefix, strings.Join(dirs, ", "))}
	}
}

// describeChart names a remote chart in error messages.
func describeChart(h *HelmOptions) string {
	s := strconv.Quote(h.Chart)
	if h.Repo != "" {
		s += " of repository " + strconv.Quote(h.Repo)
	}
	if h.Version != "" {
		s += " version " + strconv.Quote(h.Version)
	}
	return s
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

// generatedChart returns the chart of a bundle that has none: files are
// its rawyaml/ files (none for a kustomize bundle), id the manifest ID the
// version is made from.
func generatedChart(b Bundle, id string, files []*chart.File) (*chart.Chart, error) {
	c := &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion:  chart.APIVersionV2,
			Name:        chartName(b.Name),
			Version:     "0.0.0+" + strings.TrimPrefix(id, "s-")[:12],
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
	var files []*chart.File
	for _, r := range rawManifests(m) {
		data, err := r.Data()
		if err != nil {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		docs, _, err := objectDocuments(data)
		if err != nil {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		if len(docs) > 0 {
			files = append(files, &chart.File{Name: rawDir + r.Name, Data: docs})
		}
	}
	return files, nil
}

// rawManifests returns the resources of m that a raw YAML bundle deploys:
// *.yaml, *.yml and *.json files, less those isRawManifest leaves out and
// those under a subdirectory holding its own fleet.yaml or Chart.yaml.
func rawManifests(m Manifest) []Resource {
	var skipDirs []string
	for _, r := range m.Resources {
		base, dir := path.Base(r.Name), path.Dir(r.Name)
		if dir != "." && (base == optionsFile || base == optionsFileFallback || base == "Chart.yaml") {
			skipDirs = append(skipDirs, dir+"/")
		}
	}
	var out []Resource
	for _, r := range m.Resources {
		if isRawManifest(r.Name, skipDirs) {
			out = append(out, r)
		}
	}
	return out
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
