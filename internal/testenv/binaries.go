package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// TestbinEnv names the environment variable that points Binaries at a
	// directory of prebuilt binaries, skipping hack/k8s-testbin/build.sh.
	TestbinEnv = "FLOTILLA_TESTBIN"

	// rootModule is the module path that marks the repository root.
	rootModule = "github.com/flotilla-gitops/flotilla"
	// buildScript is build.sh's path relative to the repository root.
	buildScript = "hack/k8s-testbin/build.sh"
	// buildTimeout bounds a cold build, which takes 7–12 minutes on 2 cores.
	buildTimeout = 45 * time.Minute
	// kwokStagesDir is the subdirectory of the testbin dir with kwok's Stage configs.
	kwokStagesDir = "kwok-stages"
)

// Names of the binaries in the testbin directory.
const (
	binEtcd              = "etcd"
	binKubeAPIServer     = "kube-apiserver"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
	binKwok              = "kwok"
)

// resolveTestbin runs at most once per test binary; concurrent test packages
// are serialised by build.sh's own lock.
var resolveTestbin = sync.OnceValues(func() (string, error) {
	dir, err := findTestbin()
	if err != nil {
		return "", err
	}
	for _, name := range []string{binEtcd, binKubeAPIServer} {
		if err := checkExecutable(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("testbin directory %s: %w", dir, err)
		}
	}
	return dir, nil
})

// Binaries returns the directory that holds etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kwok and kwok-stages/.
// If FLOTILLA_TESTBIN is set it names that directory; otherwise Binaries runs
// hack/k8s-testbin/build.sh from the repository root (found by walking up
// from the working directory) and uses the directory it prints. The build is
// cached outside the repository, so only the first run on a machine is slow.
// The result is computed once per test binary. Binaries fails the test if the
// directory cannot be had; it does not skip in -short mode.
func Binaries(t testing.TB) string {
	t.Helper()
	dir, err := resolveTestbin()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dir
}

// findTestbin returns FLOTILLA_TESTBIN or the output of build.sh.
func findTestbin() (string, error) {
	if dir := os.Getenv(TestbinEnv); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("resolving %s=%s: %w", TestbinEnv, dir, err)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	root, err := findRepoRoot(wd)
	if err != nil {
		return "", fmt.Errorf("%w (set %s to use prebuilt binaries)", err, TestbinEnv)
	}
	return runBuildScript(filepath.Join(root, buildScript))
}

// runBuildScript runs build.sh and returns the directory it prints. In
// verbose mode the script's progress is streamed to stderr, since a cold
// build runs for minutes.
func runBuildScript(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if testing.Verbose() {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running %s (set %s to use prebuilt binaries): %w\n%s",
			script, TestbinEnv, err, lastLines(stderr.String(), logTailLines))
	}
	dir := strings.TrimSpace(stdout.String())
	if dir == "" || strings.Contains(dir, "\n") {
		return "", fmt.Errorf("running %s: want one directory on stdout, got %q", script, stdout.String())
	}
	if d := time.Since(start); d > time.Minute {
		fmt.Fprintf(os.Stderr, "testenv: built Kubernetes test binaries in %s\n", d.Round(time.Second))
	}
	return dir, nil
}

// findRepoRoot walks up from dir to the directory whose go.mod declares the
// flotilla root module.
func findRepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if module, err := moduleName(filepath.Join(d, "go.mod")); err == nil && module == rootModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod for module %s above %s", rootModule, dir)
		}
	}
}

// moduleName returns the module path declared in the go.mod at path.
func moduleName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return "", fmt.Errorf("%s has no module line", path)
}

// checkExecutable reports whether path is an executable regular file.
func checkExecutable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("missing binary: %w", err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return errors.New(path + " is not an executable file")
	}
	return nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
