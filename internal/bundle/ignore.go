package bundle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

const ignoreFile = ".fleetignore"

// ignoreRule is one pattern line of a .fleetignore file.
type ignoreRule struct {
	pattern string
	// dirOnly is set by a trailing "/": the rule matches directories only.
	dirOnly bool
	// anchored is set by a leading "/" (or any inner "/"): the rule matches
	// the path relative to the .fleetignore directory, not the base name.
	anchored bool
}

// ignorer answers whether a path is excluded by .fleetignore files. A
// .fleetignore applies to its own directory and everything below it,
// including subdirectories that are bundles of their own, so that Scan and
// Read agree. (Fleet reads only the .fleetignore files at or below the
// bundle directory when loading files, and none while scanning.)
//
// Patterns are matched with path.Match, one per line; blank lines and lines
// starting with "#" are skipped. A pattern without "/" matches the base name
// of a file or directory at any depth, and also its path relative to the
// .fleetignore directory. A pattern with a trailing "/" matches directories
// only. A pattern with a leading or inner "/" matches only the relative path.
// Ignoring a directory ignores everything in it. Negation ("!") is not
// supported and such lines are skipped; Fleet does not support it either
// (it takes them as literal names, which match nothing in practice).
//
// An ignorer caches the files it has read; it is not safe for concurrent
// use.
type ignorer struct {
	repo  repo
	files *fileReader
	rules map[string][]ignoreRule // by repo-relative directory
}

func newIgnorer(r repo, files *fileReader) *ignorer {
	return &ignorer{repo: r, files: files, rules: map[string][]ignoreRule{}}
}

// ignored reports whether the repo-relative path rel is excluded. The
// repository root itself never is.
func (ig *ignorer) ignored(rel string, isDir bool) (bool, error) {
	if rel == "." {
		return false, nil
	}
	dir := "."
	rest := rel
	for {
		rules, err := ig.load(dir)
		if err != nil {
			return false, err
		}
		for _, rule := range rules {
			if rule.matches(rest, isDir) {
				return true, nil
			}
		}
		next, after, found := strings.Cut(rest, "/")
		if !found {
			return false, nil
		}
		dir = path.Join(dir, next)
		rest = after
	}
}

func (rule ignoreRule) matches(rel string, isDir bool) bool {
	if rule.dirOnly && !isDir {
		return false
	}
	// The patterns were checked when loaded, so Match cannot fail.
	if ok, _ := path.Match(rule.pattern, rel); ok {
		return true
	}
	if rule.anchored {
		return false
	}
	ok, _ := path.Match(rule.pattern, path.Base(rel))
	return ok
}

// load returns the rules of dir's .fleetignore, reading it on first use.
func (ig *ignorer) load(dir string) ([]ignoreRule, error) {
	if rules, ok := ig.rules[dir]; ok {
		return rules, nil
	}
	name := path.Join(dir, ignoreFile)
	data, err := ig.files.read(ig.repo.abs(name))
	if errors.Is(err, fs.ErrNotExist) {
		ig.rules[dir] = nil
		return nil, nil
	}
	var tooLarge *sizelimit.Error
	if errors.As(err, &tooLarge) {
		return nil, &ValidationError{Path: name, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	rules, err := parseIgnore(data)
	if err != nil {
		return nil, &ValidationError{Path: name, Err: err}
	}
	ig.rules[dir] = rules
	return rules, nil
}

func parseIgnore(data []byte) ([]ignoreRule, error) {
	var rules []ignoreRule
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		rule := ignoreRule{pattern: line}
		if strings.HasSuffix(rule.pattern, "/") {
			rule.dirOnly = true
			rule.pattern = strings.TrimRight(rule.pattern, "/")
		}
		if strings.HasPrefix(rule.pattern, "/") {
			rule.anchored = true
			rule.pattern = strings.TrimLeft(rule.pattern, "/")
		}
		if strings.Contains(rule.pattern, "/") {
			rule.anchored = true
		}
		if rule.pattern == "" {
			continue
		}
		if _, err := path.Match(rule.pattern, ""); err != nil {
			return nil, fmt.Errorf("line %d: pattern %q: %w", n, line, err)
		}
		rules = append(rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return rules, nil
}
