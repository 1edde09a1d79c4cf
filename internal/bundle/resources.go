package bundle

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
)

// chartPrefix is where Read puts a chart that lives outside the bundle
// directory; Fleet uses the same prefix for the charts it downloads.
const chartPrefix = ".chart/"

// manifest collects the bundle's files.
//
// Which files: every regular file under the bundle directory, named by its
// slash path relative to that directory, except hidden files and
// directories (as in Fleet, which also keeps .git and .fleetignore out),
// files excluded by .fleetignore, the bundle's own fleet.yaml/fleet.yml and
// its values files (exclude).
//
// Nested bundles: a subdirectory with its own fleet.yaml is a bundle of its
// own, and its files, fleet.yaml included, are ALSO resources of this
// bundle. That is what Fleet does (fleet.md §1.3: a nested fleet.yaml "is
// still embedded as a resource of the parent bundle"), and following it
// keeps manifest IDs equal to Fleet's. The cost is that a change inside a
// nested bundle changes the parent's manifest ID too, so the parent is
// redeployed (with unchanged objects). The files are never deployed twice:
// Chart leaves everything under a directory with its own fleet.yaml (or
// Chart.yaml) out of the parent's raw YAML, as Fleet does.
//
// A local chart outside the bundle directory is added under
// ".chart/<directory name>/". Symbolic links to files inside the repository
// are followed; links that leave it, dangle or point to directories are a
// *ValidationError (Fleet fails on directory links too).
func (rd *reader) manifest(exclude map[string]bool, chartDir string) (Manifest, error) {
	res, err := rd.collect(rd.dir, "", exclude)
	if err != nil {
		return Manifest{}, err
	}
	if chartDir != "" && !withinDir(rd.dir, chartDir) {
		chartRes, err := rd.collect(chartDir, chartManifestPath(rd.dir, chartDir)+"/", nil)
		if err != nil {
			return Manifest{}, err
		}
		res = append(res, chartRes...)
	}
	sortResources(res)
	return Manifest{Resources: res}, nil
}

// sortResources sorts resources by name, the order Fleet hashes them in.
func sortResources(res []Resource) {
	slices.SortFunc(res, func(a, b Resource) int { return cmp.Compare(a.Name, b.Name) })
}

// chartManifestPath returns where the chart directory chartRel (relative
// to the repository root) is found in the manifest of the bundle in dir:
// its path relative to dir when inside it, else ".chart/<base name>".
func chartManifestPath(dir, chartRel string) string {
	if withinDir(dir, chartRel) {
		return relTo(dir, chartRel)
	}
	base := path.Base(chartRel)
	if base == "." || base == ".." || base == "/" {
		base = "chart"
	}
	return chartPrefix + base
}

// collect returns the files under the repo directory base as resources
// named prefix + their path relative to base, leaving out the names in
// exclude (compared without prefix).
func (rd *reader) collect(base, prefix string, exclude map[string]bool) ([]Resource, error) {
	var out []Resource
	err := filepath.WalkDir(rd.repo.abs(base), func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("bundle %s: read %s: %w", rd.name, base, err)
		}
		rel, err := rd.repo.rel(abs)
		if err != nil {
			return err
		}
		if rel == base {
			return nil
		}
		if isHidden(d.Name()) {
			return skip(d)
		}
		ignored, err := rd.ig.ignored(rel, d.IsDir())
		if err != nil {
			return err
		}
		if ignored {
			return skip(d)
		}
		if d.IsDir() {
			return nil
		}
		name := relTo(base, rel)
		if exclude[name] {
			return nil
		}
		regular, err := rd.regularFile(rel, d)
		if err != nil || !regular {
			return err
		}
		data, err := rd.readFile(rel)
		if err != nil {
			return err
		}
		out = append(out, newResource(prefix+name, data))
		return nil
	})
	return out, err
}

// skip tells WalkDir to leave out d: the whole tree for a directory.
func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return filepath.SkipDir
	}
	return nil
}

// regularFile reports whether the non-directory entry d at rel is, or links
// to, a regular file inside the repository. Devices, sockets and pipes are
// not; links that leave the repository, dangle or point to a directory are
// an error.
func (rd *reader) regularFile(rel string, d fs.DirEntry) (bool, error) {
	if d.Type()&fs.ModeSymlink == 0 {
		return d.Type().IsRegular(), nil
	}
	_, fi, err := rd.repo.resolve(rel)
	switch {
	case errors.Is(err, ErrOutsideRepo):
		return false, &ValidationError{Bundle: rd.name, Path: rel, Err: err}
	case errors.Is(err, fs.ErrNotExist):
		return false, &ValidationError{Bundle: rd.name, Path: rel, Err: errors.New("symbolic link target does not exist")}
	case err != nil:
		return false, fmt.Errorf("bundle %s: %s: %w", rd.name, rel, err)
	case fi.IsDir():
		return false, &ValidationError{Bundle: rd.name, Path: rel, Err: errors.New("symbolic link to a directory is not supported")}
	}
	return fi.Mode().IsRegular(), nil
}
