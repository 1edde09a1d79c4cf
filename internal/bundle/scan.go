package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Scan returns the bundle directories of the repository checked out at
// root, as sorted, slash-separated paths relative to root ("." for root
// itself), following Fleet's rules (fleet apply's directory walk):
//
//   - paths are globs relative to root (path.Match syntax, leading "/"
//     ignored); no paths means ["."]. As in a shell, a wildcard does not
//     match a hidden name (".github") unless the pattern has the dot. A
//     glob that matches no directory is a *ValidationError wrapping
//     ErrNoMatch; one that leaves root, through ".." or a symbolic link,
//     wraps ErrOutsideRepo. A match that is a symbolic link to a directory
//     inside root is scanned (and reported) at its target.
//   - For each matched directory, every directory at or below it that holds
//     fleet.yaml (or fleet.yml) is a bundle.
//   - The matched directory itself is also a bundle when it holds, at any
//     depth, a *.yaml or *.yml file that is not under a subdirectory with
//     its own fleet.yaml. Hidden files and directories do not count here,
//     because Read leaves them out of the bundle anyway (Fleet counts them,
//     which can turn a repository root into a bundle only because of
//     .github/workflows/*.yml).
//   - .git directories are never entered, .fleetignore files are honoured
//     (see ignorer), and symbolic links to directories are not followed.
//
// When the paths hold no bundle at all, Scan returns ErrNoBundles, as
// fleet apply fails in that case; callers that accept an empty repository
// can check for it with errors.Is.
func Scan(root string, paths []string) ([]string, error) {
	r, err := openRepo(root)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	s := scanner{repo: r, ig: newIgnorer(r, Limits{}.files()), found: map[string]bool{}}
	for _, p := range paths {
		dirs, err := r.globDirs(p)
		if err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			if err := s.scan(dir); err != nil {
				return nil, err
			}
		}
	}
	if len(s.found) == 0 {
		return nil, fmt.Errorf("scan %s: %w", strings.Join(paths, ", "), ErrNoBundles)
	}
	out := make([]string, 0, len(s.found))
	for dir := range s.found {
		out = append(out, dir)
	}
	slices.Sort(out)
	return out, nil
}

// globDirs returns the directories matching the glob p, in glob order.
func (r repo) globDirs(p string) ([]string, error) {
	pattern, err := cleanRel(strings.TrimLeft(p, "/"))
	if err != nil {
		return nil, &ValidationError{Path: p, Err: err}
	}
	matches, err := fs.Glob(os.DirFS(r.root), pattern)
	if err != nil {
		return nil, &ValidationError{Path: p, Err: fmt.Errorf("invalid glob: %w", err)}
	}
	var dirs []string
	for _, m := range matches {
		if hiddenMatch(pattern, m) {
			continue
		}
		// A match that is a symbolic link is scanned at its target.
		target, fi, err := r.resolve(m)
		if errors.Is(err, ErrOutsideRepo) {
			return nil, &ValidationError{Path: p, Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", m, err)
		}
		if fi.IsDir() && !slices.Contains(dirs, target) {
			dirs = append(dirs, target)
		}
	}
	if len(dirs) == 0 {
		return nil, &ValidationError{Path: p, Err: ErrNoMatch}
	}
	return dirs, nil
}

// hiddenMatch reports whether the glob match m has a hidden component (such
// as .git or .github) that the pattern did not ask for with a leading dot,
// as shells do. Glob matches have as many components as the pattern.
func hiddenMatch(pattern, m string) bool {
	pc, mc := strings.Split(pattern, "/"), strings.Split(m, "/")
	for i := range mc {
		if isHidden(mc[i]) && (i >= len(pc) || !strings.HasPrefix(pc[i], ".")) {
			return true
		}
	}
	return false
}

type scanner struct {
	repo  repo
	ig    *ignorer
	found map[string]bool
}

// scan records the bundles at and below dir, a directory the paths matched.
func (s *scanner) scan(dir string) error {
	if ignored, err := s.ig.ignored(dir, true); err != nil || ignored {
		return err
	}
	return filepath.WalkDir(s.repo.abs(dir), func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("scan %s: %w", dir, err)
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := s.repo.rel(abs)
		if err != nil {
			return err
		}
		if rel != dir {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			if ignored, err := s.ig.ignored(rel, true); err != nil || ignored {
				if err == nil {
					err = filepath.SkipDir
				}
				return err
			}
		}
		opts, err := s.repo.optionsFileIn(rel)
		if err != nil {
			return err
		}
		if opts != "" {
			s.found[rel] = true
			return nil
		}
		if rel == dir {
			loose, err := s.hasLooseYAML(dir)
			if err != nil {
				return err
			}
			if loose {
				s.found[rel] = true
			}
		}
		return nil
	})
}

// hasLooseYAML reports whether dir holds a YAML file, directly or in
// subdirectories that have no options file of their own.
func (s *scanner) hasLooseYAML(dir string) (bool, error) {
	entries, err := os.ReadDir(s.repo.abs(dir))
	if err != nil {
		return false, fmt.Errorf("scan %s: %w", dir, err)
	}
	for _, e := range entries {
		if isHidden(e.Name()) {
			continue
		}
		rel := path.Join(dir, e.Name())
		ignored, err := s.ig.ignored(rel, e.IsDir())
		if err != nil {
			return false, err
		}
		if ignored {
			continue
		}
		if !e.IsDir() {
			if isYAMLName(e.Name()) {
				return true, nil
			}
			continue
		}
		opts, err := s.repo.optionsFileIn(rel)
		if err != nil {
			return false, err
		}
		if opts != "" {
			continue
		}
		if loose, err := s.hasLooseYAML(rel); err != nil || loose {
			return loose, err
		}
	}
	return false, nil
}
