package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// SharedEnv names the environment variable that points SharedDir at the
// shared fixture directory instead of ../shared beside the repository root.
const SharedEnv = "FLOTILLA_SHARED"

// SharedDir returns the absolute path of elem inside the shared fixture
// directory (Fleet's example repositories, Fleet's renders of them and the
// charts they download): $FLOTILLA_SHARED, or the directory shared beside
// the repository root, which is where CI puts it.
//
// A missing path is never a silent pass. When CI is true (as CI sets it)
// SharedDir fails the test naming the path; elsewhere it skips the test with
// a message that says the checks did not run.
func SharedDir(tb testing.TB, elem ...string) string {
	tb.Helper()
	path, err := sharedPath(elem...)
	if err == nil {
		_, err = os.Stat(path)
	}
	if err == nil {
		return path
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		tb.Fatalf("testenv: shared fixtures missing: %v; CI must run these checks with ../shared beside the repository (or %s set)", err, SharedEnv)
		return ""
	}
	tb.Skipf("SKIPPED: shared fixtures missing: %v; these checks did not run (put ../shared beside the repository or set %s)", err, SharedEnv)
	return ""
}

// sharedPath is elem inside $FLOTILLA_SHARED or ../shared beside the
// repository root, made absolute.
func sharedPath(elem ...string) (string, error) {
	dir := os.Getenv(SharedEnv)
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		root, err := findRepoRoot(wd)
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), "shared")
	}
	return filepath.Abs(filepath.Join(append([]string{dir}, elem...)...))
}
