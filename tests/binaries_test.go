package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// bins holds the paths of bin/flotilla-worker, bin/flotilla and the
// Temporal-on-PostgreSQL server (testenv.BuildTemporalServer) built once for
// this test binary by TestMain.
var bins struct{ worker, cli, temporal string }

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "flotilla-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // temp dir; leftovers are harmless
	// The CLI pins the controllers' sealing-key signer in the user's config
	// dir; every CLI the tests run keeps its pins in the temp dir instead.
	if err := os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The Temporal server links in parallel with the worker and the CLI:
	// each link is mostly one core for about a minute.
	var temporalErr error
	var temporalBuild sync.WaitGroup
	temporalBuild.Go(func() { bins.temporal, temporalErr = testenv.BuildTemporalServer(dir) })
	defer temporalBuild.Wait() // runs before RemoveAll: never remove dir under a running build
	bins.worker = filepath.Join(dir, "flotilla-worker")
	bins.cli = filepath.Join(dir, "flotilla")
	for out, pkg := range map[string]string{bins.worker: "../worker", bins.cli: "../starter"} {
		cmd := exec.Command("go", "build", "-ldflags", "-X github.com/flotilla-gitops/flotilla/internal/buildinfo.version=v0.0.0-e2e", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", pkg, err)
			return 1
		}
	}
	temporalBuild.Wait()
	if temporalErr != nil {
		fmt.Fprintln(os.Stderr, temporalErr)
		return 1
	}
	return m.Run()
}
