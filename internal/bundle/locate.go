package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Location is one bundle of a repository: its directory (slash-separated,
// relative to the repository root, "." for the root) and, for an entry of
// a GitRepo's bundles, its options file.
type Location struct {
	Dir string
	// Options is the fleet.yaml-format file, relative to Dir, that
	// configures the bundle instead of Dir's fleet.yaml ("" for Dir's
	// fleet.yaml, if any). Its name, without extension, is appended to the
	// bundle's name, so one directory can be several bundles.
	Options string
}

// Locate returns the bundles of the repository checked out at root. With
// bundles (a GitRepo's bundles, Fleet 0.13's user-driven scan) it returns
// exactly those entries, in order, and paths are not used, as fleet apply
// --driven-scan ignores them; otherwise the directories Scan finds under
// paths.
//
// Each entry's base must be a directory inside the repository, and its
// options file, when given, a file there; otherwise, and for two entries
// naming the same base and options file, Locate returns a
// *ValidationError naming the entry and the path. Unlike Fleet, which
// skips a base that does not exist, a missing base is an error: it is a
// typo in the GitRepo, not an empty directory.
func Locate(root string, paths []string, bundles []api.BundlePath) ([]Location, error) {
	if len(bundles) == 0 {
		dirs, err := Scan(root, paths)
		if err != nil {
			return nil, err
		}
		out := make([]Location, len(dirs))
		for i, d := range dirs {
			out[i] = Location{Dir: d}
		}
		return out, nil
	}
	r, err := openRepo(root)
	if err != nil {
		return nil, err
	}
	out := make([]Location, 0, len(bundles))
	seen := map[Location]int{}
	for i, b := range bundles {
		loc, err := r.locate(i, b)
		if err != nil {
			return nil, err
		}
		if j, ok := seen[loc]; ok {
			return nil, &ValidationError{Path: loc.Dir, Field: fmt.Sprintf("bundles[%d]", i),
				Err: fmt.Errorf("the same bundle as bundles[%d]", j)}
		}
		seen[loc] = i
		out = append(out, loc)
	}
	return out, nil
}

// locate checks entry i of a GitRepo's bundles.
func (r repo) locate(i int, b api.BundlePath) (Location, error) {
	field := fmt.Sprintf("bundles[%d].base", i)
	dir, err := cleanRel(strings.TrimLeft(b.Base, "/"))
	if err != nil {
		return Location{}, &ValidationError{Path: b.Base, Field: field, Err: err}
	}
	if err := r.check(dir, field, true); err != nil {
		return Location{}, err
	}
	loc := Location{Dir: dir}
	if b.Options == "" {
		return loc, nil
	}
	field = fmt.Sprintf("bundles[%d].options", i)
	file, err := cleanRel(path.Join(dir, b.Options))
	if err != nil || path.IsAbs(b.Options) {
		return Location{}, &ValidationError{Path: path.Join(dir, b.Options), Field: field, Err: ErrOutsideRepo}
	}
	if err := r.check(file, field, false); err != nil {
		return Location{}, err
	}
	loc.Options = path.Clean(b.Options)
	return loc, nil
}

// check checks that rel exists inside the repository and is a directory
// (dir) or a regular file; errors name field.
func (r repo) check(rel, field string, dir bool) error {
	_, fi, err := r.resolve(rel)
	switch {
	case errors.Is(err, ErrOutsideRepo):
		return &ValidationError{Path: rel, Field: field, Err: err}
	case errors.Is(err, fs.ErrNotExist):
		return &ValidationError{Path: rel, Field: field, Err: errors.New("does not exist")}
	case err != nil:
		return fmt.Errorf("%s: %s: %w", field, rel, err)
	case dir && !fi.IsDir():
		return &ValidationError{Path: rel, Field: field, Err: errors.New("not a directory")}
	case !dir && !fi.Mode().IsRegular():
		return &ValidationError{Path: rel, Field: field, Err: errors.New("not a regular file")}
	}
	return nil
}
