package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Bounds of reading what a GitRepo's bundles reference: beyond them a
// change is assumed to touch the GitRepo.
const (
	maxInputRounds    = 8       // rounds of following references to references
	maxInputFiles     = 2000    // option, kustomization and chart files read
	maxInputFileBytes = 1 << 20 // size of one such file
)

// errUnsure stops collecting inputs: a change must be assumed to touch them.
var errUnsure = errors.New("inputs not known for sure")

// Inputs name what a GitRepo reads of its repository.
type Inputs struct {
	// Paths are the GitRepo's paths globs (spec.paths, "." for the whole
	// repository).
	Paths []string
	// Bundles are the GitRepo's spec.bundles entries; their bases and
	// options files are inputs too.
	Bundles []api.BundlePath
}

// Touches reports whether commit to changes anything a GitRepo with inputs
// in reads at commit from: a file under its paths (or bundles' bases and
// options files), any file or directory the option files, kustomizations
// and charts there reference outside them (helm.valuesFiles, helm.chart,
// kustomize.dir, kustomization resources, bases, components, patches,
// generator files, file:// chart dependencies, followed to what those
// reference), or any .fleetignore. It reads the clone of r, fetching it
// (once for every GitRepo of the remote) when it lacks either commit.
//
// It answers true whenever it cannot be sure: a symbolic link among the
// inputs, a file it cannot parse, or references beyond its bounds. An
// error means the clone could not be read or fetched.
func (c *Cache) Touches(ctx context.Context, r Remote, from, to string, in Inputs) (bool, error) {
	if !IsFullHash(from) || !IsFullHash(to) {
		return false, fmt.Errorf("compare %q with %q in %s: not 40-hex commit hashes", from, to, api.RedactURL(r.URL))
	}
	ep, err := r.endpoint()
	if err != nil {
		return false, err
	}
	unlock, err := c.lock(ctx, ep.url)
	if err != nil {
		return false, fmt.Errorf("compare commits of %s: %w", ep.url, err)
	}
	defer unlock()
	repo, err := c.openClone(ep.url)
	if err != nil {
		return false, err
	}
	var trees [2]*object.Tree
	for i, h := range []string{from, to} {
		commit, err := c.ensureCommit(ctx, repo, ep, plumbing.NewHash(strings.ToLower(h)))
		if err != nil {
			return false, err
		}
		if trees[i], err = commit.Tree(); err != nil {
			return false, fmt.Errorf("read tree of %s in %s: %w", h, ep.url, corrupt(err))
		}
	}
	changes, err := object.DiffTreeWithOptions(ctx, trees[0], trees[1], nil)
	if err != nil {
		return false, fmt.Errorf("compare %s with %s in %s: %w", from, to, ep.url, err)
	}
	changed := make([]string, 0, 2*len(changes))
	for _, ch := range changes {
		for _, name := range []string{ch.From.Name, ch.To.Name} {
			if name != "" {
				changed = append(changed, name)
			}
		}
	}
	if len(changed) == 0 {
		return false, nil
	}
	rules, err := inputsAt(trees[0], in)
	if errors.Is(err, errUnsure) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read inputs at %s in %s: %w", from, ep.url, err)
	}
	return rules.touchedBy(changed), nil
}

// inputRules are the paths a GitRepo reads: globs as in spec.paths (a
// path is read when its leading components match one), and prefixes (a
// file, or a directory and everything below it).
type inputRules struct {
	globs    []string
	prefixes []string
}

// touchedBy reports whether any of the changed files is an input, or is a
// .fleetignore (which may hide or reveal inputs from any directory above
// them).
func (r inputRules) touchedBy(changed []string) bool {
	for _, p := range changed {
		if path.Base(p) == ".fleetignore" || r.covers(p) {
			return true
		}
	}
	return false
}

// covers reports whether the repository file p is an input.
func (r inputRules) covers(p string) bool {
	comps := strings.Split(p, "/")
	for _, g := range r.globs {
		if g == "." {
			return true
		}
		n := strings.Count(g, "/") + 1
		if len(comps) < n {
			continue
		}
		// A malformed glob matches nothing, as in bundle.Scan (which refuses it).
		if ok, _ := path.Match(g, strings.Join(comps[:n], "/")); ok {
			return true
		}
	}
	for _, q := range r.prefixes {
		if q == "." || p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// rulesOf returns the GitRepo's own inputs: its paths and bundles.
func rulesOf(in Inputs) inputRules {
	var r inputRules
	for _, g := range in.Paths {
		r.globs = append(r.globs, path.Clean(strings.TrimLeft(g, "/")))
	}
	for _, b := range in.Bundles {
		base := path.Clean(strings.TrimLeft(b.Base, "/"))
		r.prefixes = append(r.prefixes, base)
		if b.Options != "" {
			r.prefixes = append(r.prefixes, path.Join(base, b.Options), path.Clean(strings.TrimLeft(b.Options, "/")))
		}
	}
	if len(r.globs) == 0 && len(r.prefixes) == 0 {
		r.globs = []string{"."}
	}
	return r
}

// referenceFiles are the files whose contents may name other files a
// bundle reads.
var referenceFiles = map[string]bool{
	"fleet.yaml": true, "fleet.yml": true,
	"kustomization.yaml": true, "kustomization.yml": true, "Kustomization": true,
	"Chart.yaml": true, "requirements.yaml": true,
}

// inputsAt returns the inputs of a GitRepo in tree: its own, plus what the
// reference files among them name outside them, followed until nothing
// new is named. errUnsure: the inputs cannot be known within the bounds.
func inputsAt(tree *object.Tree, in Inputs) (inputRules, error) {
	rules := rulesOf(in)
	options := optionsFiles(in)
	read := map[string]bool{}
	for range maxInputRounds {
		added := false
		err := tree.Files().ForEach(func(f *object.File) error {
			if read[f.Name] || !rules.covers(f.Name) {
				return nil
			}
			if f.Mode == filemode.Symlink {
				return errUnsure // the link may lead anywhere in the repository
			}
			dir, isOptions := options[f.Name]
			if !isOptions && !referenceFiles[path.Base(f.Name)] {
				return nil
			}
			if !isOptions {
				dir = path.Dir(f.Name)
			}
			read[f.Name] = true
			if len(read) > maxInputFiles || f.Size > maxInputFileBytes {
				return errUnsure
			}
			refs, err := fileReferences(f, dir)
			if err != nil {
				return err
			}
			for _, p := range refs {
				if !rules.covers(p) {
					rules.prefixes = append(rules.prefixes, p)
					added = true
				}
			}
			return nil
		})
		if err != nil || !added {
			return rules, err
		}
	}
	return rules, errUnsure
}

// optionsFiles maps each bundles entry's options file to its base: it is
// read in place of the base's fleet.yaml, so the paths it names are
// relative to the base, not to its own directory.
func optionsFiles(in Inputs) map[string]string {
	out := map[string]string{}
	for _, b := range in.Bundles {
		if b.Options != "" {
			base := path.Clean(strings.TrimLeft(b.Base, "/"))
			out[path.Join(base, b.Options)] = base
		}
	}
	return out
}

// fileReferences returns the repository paths the YAML file f may name:
// every string in it read as a path relative to dir (a
// "file://" prefix and a generator's "key=" prefix removed), leaving out
// those that leave the repository. Over-reading is harmless: a string that
// names no file only makes the GitRepo read more.
func fileReferences(f *object.File, dir string) ([]string, error) {
	rd, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, corrupt(err))
	}
	defer func() { _ = rd.Close() }() // read-only
	data, err := io.ReadAll(io.LimitReader(rd, maxInputFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, corrupt(err))
	}
	var doc any
	if yaml.Unmarshal(data, &doc) != nil {
		return nil, errUnsure // the render will say what is wrong with it
	}
	var out []string
	for _, s := range yamlStrings(doc, nil) {
		for _, cand := range referenceCandidates(s) {
			p := path.Join(dir, cand)
			if p != ".." && !strings.HasPrefix(p, "../") && !path.IsAbs(cand) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// referenceCandidates are the relative paths a string may be.
func referenceCandidates(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "\n\x00") || strings.Contains(s, "://") && !strings.HasPrefix(s, "file://") {
		return nil
	}
	s = strings.TrimPrefix(s, "file://")
	out := []string{s}
	if _, file, ok := strings.Cut(s, "="); ok && file != "" {
		out = append(out, file)
	}
	return out
}

// yamlStrings appends every string (values and keys) in a decoded YAML
// document.
func yamlStrings(v any, out []string) []string {
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, e := range v {
			out = yamlStrings(e, out)
		}
	case map[string]any:
		for k, e := range v {
			out = append(out, k)
			out = yamlStrings(e, out)
		}
	}
	return out
}
