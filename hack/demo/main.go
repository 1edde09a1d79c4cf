// Command demo is what `make run` starts: the worker with its embedded
// Temporal server and UI, one local Kubernetes cluster (a real
// kube-apiserver with controller-manager, scheduler and a kwok node, from
// the test harness), and a Git server holding examples/demo-repo. It
// registers the cluster, applies examples/demo.yaml and leaves everything
// running until Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func main() {
	testing.Init() // the harness asks testing.Short()
	bin := flag.String("bin", "bin", "directory holding flotilla-worker and flotilla")
	stateDir := flag.String("state-dir", ".flotilla", "the worker's state directory")
	examples := flag.String("examples", "examples", "directory holding demo-repo/ and demo.yaml")
	devListen := flag.String("dev-listen", "127.0.0.1:7233", "Temporal frontend address")
	uiListen := flag.String("ui-listen", "127.0.0.1:8233", "Temporal UI address")
	webhookListen := flag.String("webhook-listen", "127.0.0.1:8080", "Git webhook receiver address")
	flag.Parse()

	r := &runner{}
	defer r.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("Starting a local demo cluster (kube-apiserver, etcd, controller-manager, scheduler, kwok)...")
	cluster := testenv.StartClusters(r, 1, testenv.Options{Sim: true})[0]

	files, err := readTree(filepath.Join(*examples, "demo-repo"))
	if err != nil {
		r.Fatalf("%v", err)
	}
	git := testenv.NewGitServer(r, testenv.GitServerOptions{})
	repo := git.CreateRepo(r, "demo-repo", files)
	fmt.Printf("Serving %s/demo-repo as %s\n", *examples, repo.URL())

	worker := exec.CommandContext(ctx, filepath.Join(*bin, "flotilla-worker"), "--dev", "--state-dir", *stateDir,
		"--dev-listen", *devListen, "--ui-listen", *uiListen, "--webhook-listen", *webhookListen, "--log-format", "console")
	worker.Stdout, worker.Stderr = os.Stdout, os.Stderr
	worker.Cancel = func() error { return worker.Process.Signal(syscall.SIGTERM) }
	worker.WaitDelay = 15 * time.Second
	if err := worker.Start(); err != nil {
		r.Fatalf("start worker: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- worker.Wait() }()

	cli := func(stdin string, args ...string) error {
		args = append([]string{"--temporal-address", *devListen, "--state-dir", *stateDir}, args...)
		var err error
		for attempt := 0; attempt < 60; attempt++ { // the server may still be starting
			cmd := exec.CommandContext(ctx, filepath.Join(*bin, "flotilla"), args...)
			cmd.Stdin, cmd.Stdout = strings.NewReader(stdin), os.Stdout
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err = cmd.Run(); err == nil || !strings.Contains(stderr.String(), "unreachable") {
				if err != nil {
					err = fmt.Errorf("flotilla %s: %s", strings.Join(args, " "), stderr.String())
				}
				return err
			}
			time.Sleep(500 * time.Millisecond)
		}
		return err
	}
	manifest, err := os.ReadFile(filepath.Join(*examples, "demo.yaml"))
	if err != nil {
		r.Fatalf("%v", err)
	}
	if err := cli("", "cluster", "add", "demo", "--kubeconfig", cluster.KubeconfigPath, "--label", "env=demo"); err != nil {
		r.Fatalf("%v", err)
	}
	if err := cli(strings.ReplaceAll(string(manifest), "REPO_URL", repo.URL()), "apply", "-f", "-"); err != nil {
		r.Fatalf("%v", err)
	}
	fmt.Printf(`
Flotilla is running.
  Temporal UI:   http://%s  (workflows gitrepo/fleet-default/demo, rollout/..., cluster/demo)
  Status:        bin/flotilla status demo --watch
  Clusters:      bin/flotilla cluster list
  Demo cluster:  kubectl --kubeconfig %s get configmaps,deployments -A
  Webhooks:      POST http://%s/ (README "Webhooks")
Press Ctrl-C to stop.
`, *uiListen, cluster.KubeconfigPath, *webhookListen)

	select {
	case <-ctx.Done():
		if err := <-done; err != nil && ctx.Err() == nil {
			r.Logf("worker: %v", err)
		}
	case err := <-done:
		if err != nil {
			r.Fatalf("worker exited: %v", err)
		}
	}
}

// readTree reads every file under dir into path → content.
func readTree(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	return files, err
}
