package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Bundle is one deployable unit of a repository: a directory, its options
// and the ID of its content. It is a plain value that survives a JSON round
// trip unchanged.
type Bundle struct {
	// Name is fleet.yaml's name, or ReleaseName("<repo>/<dir>") (just the
	// repository name for the root directory), as Fleet names bundles.
	Name string `json:"name"`
	// Dir is the bundle directory, slash-separated and relative to the
	// repository root ("." for the root).
	Dir string `json:"dir"`
	// ManifestID is the ID of the bundle's Manifest.
	ManifestID string `json:"manifestID"`
	// Options are the deployment options from fleet.yaml.
	Options Options `json:"options"`
	// Labels are fleet.yaml's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// ResourceCount is the number of files in the Manifest.
	ResourceCount int `json:"resourceCount"`
}

// ReleaseName returns the Helm release name of the bundle: helm.releaseName
// when set, otherwise ReleaseName(b.Name), as Fleet's agent does.
func (b Bundle) ReleaseName() string {
	if b.Options.Helm != nil && b.Options.Helm.ReleaseName != "" {
		return b.Options.Helm.ReleaseName
	}
	return ReleaseName(b.Name)
}

// fleetYAML is the part of fleet.yaml that Read understands. Other keys are
// ignored, as Fleet ignores keys it does not know.
type fleetYAML struct {
	Name                 string            `json:"name"`
	Labels               map[string]string `json:"labels"`
	DefaultNamespace     string            `json:"defaultNamespace"`
	TargetNamespace      string            `json:"namespace"`
	ServiceAccount       string            `json:"serviceAccount"`
	KeepResources        bool              `json:"keepResources"`
	DeleteNamespace      bool              `json:"deleteNamespace"`
	NamespaceLabels      map[string]string `json:"namespaceLabels"`
	NamespaceAnnotations map[string]string `json:"namespaceAnnotations"`
	Helm                 *HelmOptions      `json:"helm"`
}

// Read reads the bundle in dir (slash-separated, relative to root) of the
// repository named repoName checked out at root, and returns it with its
// manifest.
//
// fleet.yaml (or fleet.yml) is optional; keys Read does not know are
// ignored. Problems with the repository content (YAML syntax, wrong types,
// an invalid release name, namespace or label, a remote chart, a missing
// chart directory or values file, a path leaving the repository) are
// returned as *ValidationError naming the bundle, the file and the key.
//
// helm.valuesFiles are merged into Options.Helm.Values at read time, in
// Fleet's order: inline values first, then each file on top (later files
// win, maps merge deeply).
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
	r, err := openRepo(root)
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	rd := &reader{repo: r, ig: newIgnorer(r)}
	b, m, err := rd.read(dir, repoName)
	// Errors from helpers that do not know the bundle (.fleetignore) get
	// its name here.
	var ve *ValidationError
	if errors.As(err, &ve) && ve.Bundle == "" {
		ve.Bundle = rd.name
	}
	return b, m, err
}

func (rd *reader) read(dir, repoName string) (Bundle, Manifest, error) {
	var err error
	if rd.dir, err = cleanRel(dir); err != nil {
		return Bundle{}, Manifest{}, &ValidationError{Path: dir, Err: err}
	}
	rd.name = ReleaseName(path.Join(repoName, rd.dir))
	if err := rd.checkDir(); err != nil {
		return Bundle{}, Manifest{}, err
	}
	fy, err := rd.readOptionsFile()
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	if fy.Name != "" {
		if errs := validation.IsDNS1123Subdomain(fy.Name); len(errs) > 0 {
			return Bundle{}, Manifest{}, rd.invalid("name", fmt.Errorf("%q is invalid: %s", fy.Name, strings.Join(errs, "; ")))
		}
		rd.name = fy.Name
	}
	opts, exclude, chartDir, err := rd.options(fy)
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	m, err := rd.manifest(exclude, chartDir)
	if err != nil {
		return Bundle{}, Manifest{}, err
	}
	b := Bundle{
		Name:          rd.name,
		Dir:           rd.dir,
		ManifestID:    m.ID(),
		Options:       opts,
		Labels:        fy.Labels,
		ResourceCount: len(m.Resources),
	}
	return b, m, nil
}

// reader holds the state of one Read.
type reader struct {
	repo repo
	ig   *ignorer
	// dir is the bundle directory, name the bundle name (final once
	// fleet.yaml is parsed) and file the options file ("" when none).
	dir, name, file string
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

func (rd *reader) readOptionsFile() (fleetYAML, error) {
	var fy fleetYAML
	file, err := rd.repo.optionsFileIn(rd.dir)
	if err != nil || file == "" {
		return fy, err
	}
	rd.file = file
	if _, _, err := rd.repo.resolve(file); err != nil {
		return fy, rd.invalidOrIO("", err)
	}
	data, err := os.ReadFile(rd.repo.abs(file))
	if err != nil {
		return fy, fmt.Errorf("bundle %s: read %s: %w", rd.name, file, err)
	}
	if err := yaml.Unmarshal(data, &fy); err != nil {
		return fy, rd.invalid("", err)
	}
	return fy, nil
}

// options validates fleet.yaml's settings and returns the Options, the
// bundle-relative names of files to leave out of the manifest, and the
// repo path of a local chart directory ("" when none).
func (rd *reader) options(fy fleetYAML) (Options, map[string]bool, string, error) {
	checks := []struct{ field, value string }{
		{"defaultNamespace", fy.DefaultNamespace},
		{"namespace", fy.TargetNamespace},
	}
	for _, c := range checks {
		if c.value == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(c.value); len(errs) > 0 {
			return Options{}, nil, "", rd.invalid(c.field, fmt.Errorf("%q is not a valid namespace name: %s", c.value, strings.Join(errs, "; ")))
		}
	}
	if err := rd.checkLabels("labels", fy.Labels); err != nil {
		return Options{}, nil, "", err
	}
	if err := rd.checkLabels("namespaceLabels", fy.NamespaceLabels); err != nil {
		return Options{}, nil, "", err
	}
	opts := Options{
		DefaultNamespace:     fy.DefaultNamespace,
		TargetNamespace:      fy.TargetNamespace,
		ServiceAccount:       fy.ServiceAccount,
		KeepResources:        fy.KeepResources,
		NamespaceLabels:      fy.NamespaceLabels,
		NamespaceAnnotations: fy.NamespaceAnnotations,
		DeleteNamespace:      fy.DeleteNamespace,
	}
	exclude := map[string]bool{optionsFile: true, optionsFileFallback: true}
	if fy.Helm == nil {
		return opts, exclude, "", nil
	}
	h := *fy.Helm
	if err := rd.checkHelm(&h); err != nil {
		return Options{}, nil, "", err
	}
	chartDir, err := rd.chartDir(h.Chart)
	if err != nil {
		return Options{}, nil, "", err
	}
	values, inBundle, err := rd.helmValues(&h)
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

func (rd *reader) checkLabels(field string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(labels[k])...)
		if len(errs) > 0 {
			return rd.invalid(field+"."+k, fmt.Errorf("invalid label %q: %q: %s", k, labels[k], strings.Join(errs, "; ")))
		}
	}
	return nil
}

func (rd *reader) checkHelm(h *HelmOptions) error {
	if h.ReleaseName != "" && !ValidReleaseName(h.ReleaseName) {
		return rd.invalid("helm.releaseName", fmt.Errorf("%q must be at most %d characters of lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", h.ReleaseName, MaxReleaseNameLen))
	}
	if h.Repo != "" {
		return rd.invalid("helm.repo", fmt.Errorf("%q: remote charts are %w", h.Repo, ErrUnsupported))
	}
	if isRemoteChart(h.Chart) {
		return rd.invalid("helm.chart", fmt.Errorf("%q: remote charts are %w", h.Chart, ErrUnsupported))
	}
	return nil
}

// isRemoteChart reports whether helm.chart names something to download
// rather than a local directory: a URL ("https://", "oci://"), a
// go-getter-style source ("git::https://...") or an scp-style or well-known
// host Git address, all of which Fleet accepts.
func isRemoteChart(chart string) bool {
	if strings.Contains(chart, "://") || strings.Contains(chart, "::") || strings.HasPrefix(chart, "git@") {
		return true
	}
	for _, host := range []string{"github.com/", "gitlab.com/", "bitbucket.org/"} {
		if strings.HasPrefix(chart, host) {
			return true
		}
	}
	return false
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
