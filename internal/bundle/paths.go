package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Names of the bundle options file, in order of preference.
const (
	optionsFile         = "fleet.yaml"
	optionsFileFallback = "fleet.yml"
)

// repo is a repository checkout on disk. Paths inside it are slash-separated
// and relative to its root, "." being the root itself.
type repo struct {
	// root is absolute with symbolic links resolved, so that resolved paths
	// can be compared with it.
	root string
}

func openRepo(root string) (repo, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return repo{}, fmt.Errorf("open repository %s: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return repo{}, fmt.Errorf("open repository %s: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return repo{}, fmt.Errorf("open repository %s: %w", root, err)
	}
	if !fi.IsDir() {
		return repo{}, fmt.Errorf("open repository %s: not a directory", root)
	}
	return repo{root: real}, nil
}

// abs returns the on-disk path of rel.
func (r repo) abs(rel string) string {
	return filepath.Join(r.root, filepath.FromSlash(rel))
}

// cleanRel cleans a slash-separated relative path and rejects absolute paths
// and paths that leave the repository through "..". It does not look at the
// disk; see resolve for symbolic links.
func cleanRel(p string) (string, error) {
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", fmt.Errorf("absolute path: %w", ErrOutsideRepo)
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", ErrOutsideRepo
	}
	return c, nil
}

// resolve follows symbolic links in rel and returns the repo path of the
// target and its file info. It fails with ErrOutsideRepo when the target is
// outside the repository, and with an fs.ErrNotExist error when it does not
// exist.
func (r repo) resolve(rel string) (string, fs.FileInfo, error) {
	real, err := filepath.EvalSymlinks(r.abs(rel))
	if err != nil {
		return "", nil, err
	}
	if !within(r.root, real) {
		// cleanRel rules out "..", so a symbolic link got us here.
		return "", nil, fmt.Errorf("symbolic link to %s: %w", real, ErrOutsideRepo)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", nil, err
	}
	target, err := r.rel(real)
	return target, fi, err
}

// rel converts an absolute path at or below the repository root to a repo
// path.
func (r repo) rel(abs string) (string, error) {
	rel, err := filepath.Rel(r.root, abs)
	if err != nil || !within(r.root, abs) {
		return "", fmt.Errorf("%s: %w", abs, ErrOutsideRepo)
	}
	return filepath.ToSlash(rel), nil
}

// within reports whether p is root or below it. Both are absolute and clean.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// withinDir reports whether the slash path p is dir or below it; both are
// clean and relative to the same root.
func withinDir(dir, p string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// relTo returns p relative to dir, for p within dir.
func relTo(dir, p string) string {
	if dir == "." {
		return p
	}
	if p == dir {
		return "."
	}
	return strings.TrimPrefix(p, dir+"/")
}

// optionsFileIn returns the repo-relative path of the options file of dir,
// fleet.yaml or else fleet.yml, or "" when dir has neither.
func (r repo) optionsFileIn(dir string) (string, error) {
	for _, name := range []string{optionsFile, optionsFileFallback} {
		p := path.Join(dir, name)
		fi, err := os.Stat(r.abs(p))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", p, err)
		}
		if fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", nil
}

// isHidden reports whether a file or directory name starts with a dot.
// Fleet never puts hidden files into a bundle (which also keeps .git and
// .fleetignore out).
func isHidden(name string) bool {
	return strings.HasPrefix(name, ".") && name != "." && name != ".."
}

// isYAMLName reports whether a file name has a YAML extension.
func isYAMLName(name string) bool {
	ext := path.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}
