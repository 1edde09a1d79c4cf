package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins holds the paths of bin/flotilla-worker and bin/flotilla built once
// for this test binary by TestMain.
var bins struct{ worker, cli string }

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
	return m.Run()
}
