package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"sigs.k8s.io/yaml"
)

// helmValues returns the values of h with its values files merged in, and
// the paths, relative to the bundle directory, of the values files inside
// the bundle directory (they are not bundle resources). prefix is the key
// path of h's options in fleet.yaml ("" at the top,
// "targetCustomizations[0]." in a customization) and of names the
// customization in error messages ("" at the top).
//
// Order follows Fleet (bundlereader generateValues): the inline values come
// first and each values file is merged on top, so later files win over
// earlier ones and any file wins over inline values. Values files are read
// as YAML like fleet.yaml, so numbers become float64 as in Fleet. Fleet
// only merges values files when helm.chart is set; Read merges them for
// every bundle, since ignoring a file the user listed helps no one.
func (rd *reader) helmValues(prefix string, h *HelmOptions, of string) (map[string]any, []string, error) {
	values := h.Values
	var inBundle []string
	for i, vf := range h.ValuesFiles {
		field := fmt.Sprintf("%shelm.valuesFiles[%d]", prefix, i)
		rel, err := rd.localPath(field, vf)
		if err != nil {
			return nil, nil, err
		}
		_, fi, err := rd.repo.resolve(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, rd.invalid(field, fmt.Errorf("values file %s%s does not exist", rel, of))
		}
		if err != nil {
			return nil, nil, rd.invalidOrIO(field, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, nil, rd.invalid(field, fmt.Errorf("values file %s%s is not a regular file", rel, of))
		}
		data, err := rd.readFile(rel)
		if err != nil {
			return nil, nil, err
		}
		var fileValues map[string]any
		if err := yaml.Unmarshal(data, &fileValues); err != nil {
			return nil, nil, &ValidationError{Bundle: rd.name, Path: rel, Err: err}
		}
		values = fleetyaml.MergeValues(values, fileValues)
		if withinDir(rd.dir, rel) {
			inBundle = append(inBundle, relTo(rd.dir, rel))
		}
	}
	if len(values) == 0 {
		values = nil
	}
	return values, inBundle, nil
}

// targetValues merges the helm.valuesFiles of each of targets (fleet.yaml's
// list field) into its helm.values, as helmValues does for the bundle's
// own (Fleet's bundlereader does the same for every target), and adds the
// files inside the bundle directory to exclude. It returns a new list and
// leaves targets unchanged.
func (rd *reader) targetValues(field string, targets []Target, exclude map[string]bool) ([]Target, error) {
	if !slices.ContainsFunc(targets, func(t Target) bool { return t.Helm != nil && len(t.Helm.ValuesFiles) > 0 }) {
		return targets, nil
	}
	out := slices.Clone(targets)
	for i := range out {
		if out[i].Helm == nil || len(out[i].Helm.ValuesFiles) == 0 {
			continue
		}
		h := *out[i].Helm
		of := fmt.Sprintf(" of %s[%d]", field, i)
		if out[i].Name != "" {
			of = fmt.Sprintf(" of target customization %q", out[i].Name)
		}
		values, inBundle, err := rd.helmValues(fmt.Sprintf("%s[%d].", field, i), &h, of)
		if err != nil {
			return nil, err
		}
		h.Values = values
		out[i].Helm = &h
		for _, name := range inBundle {
			exclude[name] = true
		}
	}
	return out, nil
}

// localPath resolves p, relative to the bundle directory, to a repo path,
// rejecting absolute paths and paths that leave the repository.
func (rd *reader) localPath(field, p string) (string, error) {
	if path.IsAbs(p) {
		return "", rd.invalid(field, fmt.Errorf("%q is absolute: %w", p, ErrOutsideRepo))
	}
	rel, err := cleanRel(path.Join(rd.dir, p))
	if err != nil {
		return "", rd.invalid(field, fmt.Errorf("%q: %w", p, ErrOutsideRepo))
	}
	return rel, nil
}

// invalidOrIO wraps err as a validation error when it is about the content
// (a path leaving the repository) and as a plain error otherwise.
func (rd *reader) invalidOrIO(field string, err error) error {
	if errors.Is(err, ErrOutsideRepo) {
		return rd.invalid(field, err)
	}
	return fmt.Errorf("bundle %s: %s: %s: %w", rd.name, rd.file, field, err)
}
