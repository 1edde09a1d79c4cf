// Command demo is what `make run` starts: the worker with its embedded
// Temporal server and UI, one local Kubernetes cluster (a real
// kube-apiserver with controller-manager, scheduler and a kwok node, from
// the test harness), and a Git server holding examples/demo-repo. It
// registers the cluster, applies examples/demo.yaml with the flotilla CLI
// and, the demo cluster being the management cluster too (Fleet's CRDs,
// --management-kubeconfig), examples/demo-kubectl.yaml with kubectl, prints
// what both doors show and leaves everything running until Ctrl-C.
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

// demoFlags are the command-line flags of the demo.
type demoFlags struct {
	bin, stateDir, examples            string
	devListen, uiListen, webhookListen string
}

func parseFlags() demoFlags {
	var f demoFlags
	flag.StringVar(&f.bin, "bin", "bin", "directory holding flotilla-worker and flotilla")
	flag.StringVar(&f.stateDir, "state-dir", ".flotilla", "the worker's state directory")
	flag.StringVar(&f.examples, "examples", "examples", "directory holding demo-repo/ and demo.yaml")
	flag.StringVar(&f.devListen, "dev-listen", "127.0.0.1:7233", "Temporal frontend address")
	flag.StringVar(&f.uiListen, "ui-listen", "127.0.0.1:8233", "Temporal UI address")
	flag.StringVar(&f.webhookListen, "webhook-listen", "127.0.0.1:8080", "Git webhook receiver address")
	flag.Parse()
	return f
}

func main() {
	testing.Init() // the harness asks testing.Short()
	f := parseFlags()

	r := &runner{}
	defer r.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("Starting a local demo cluster (kube-apiserver, etcd, controller-manager, scheduler, kwok)...")
	cluster := testenv.StartClusters(r, 1, testenv.Options{Sim: true})[0]
	prepareManagement(ctx, r, cluster)
	repoURL := serveDemoRepo(r, f.examples)
	done := startWorker(ctx, r, f, cluster.KubeconfigPath)
	applyDemo(ctx, r, f, cluster.KubeconfigPath, repoURL)
	k := newKubectl(r, cluster.KubeconfigPath)
	applyKubectl(ctx, r, f, k, repoURL)
	showDoors(ctx, r, f, k)
	fmt.Printf(`
Flotilla is running.
  Temporal UI:   http://%s  (workflows gitrepo/fleet-default/demo, rollout/..., cluster/demo)
  CLI door:      bin/flotilla status demo --watch        (applied with bin/flotilla apply)
  kubectl door:  kubectl --kubeconfig %[2]s get gitrepos -A   (demo-kubectl, applied with kubectl)
  Clusters:      bin/flotilla cluster list
  Demo cluster:  kubectl --kubeconfig %[2]s get configmaps,deployments -A
  kubectl:       %[3]s
  Webhooks:      POST http://%[4]s/ (README "Webhooks")
Press Ctrl-C to stop.
`, f.uiListen, cluster.KubeconfigPath, k.path, f.webhookListen)

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

// serveDemoRepo serves <examples>/demo-repo from a local Git server and
// returns its URL.
func serveDemoRepo(r *runner, examples string) string {
	files, err := readTree(filepath.Join(examples, "demo-repo"))
	if err != nil {
		r.Fatalf("%v", err)
	}
	git := testenv.NewGitServer(r, testenv.GitServerOptions{})
	repo := git.CreateRepo(r, "demo-repo", files)
	fmt.Printf("Serving %s/demo-repo as %s\n", examples, repo.URL())
	return repo.URL()
}

// startWorker starts flotilla-worker --dev, serving the Fleet resources of
// the cluster of kubeconfig too (the Kubernetes-native mode); the channel
// receives its exit. Cancelling ctx stops it with SIGTERM.
func startWorker(ctx context.Context, r *runner, f demoFlags, kubeconfig string) <-chan error {
	worker := exec.CommandContext(ctx, filepath.Join(f.bin, "flotilla-worker"), "--dev", "--state-dir", f.stateDir,
		"--dev-listen", f.devListen, "--ui-listen", f.uiListen, "--webhook-listen", f.webhookListen, "--log-format", "console",
		"--management-kubeconfig", kubeconfig, "--management-namespace", managementNamespace)
	worker.Stdout, worker.Stderr = os.Stdout, os.Stderr
	worker.Cancel = func() error { return worker.Process.Signal(syscall.SIGTERM) }
	worker.WaitDelay = 15 * time.Second
	if err := worker.Start(); err != nil {
		r.Fatalf("start worker: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- worker.Wait() }()
	return done
}

// applyDemo registers the demo cluster and applies examples/demo.yaml with
// the GitRepo pointing at repoURL.
func applyDemo(ctx context.Context, r *runner, f demoFlags, kubeconfig, repoURL string) {
	manifest, err := os.ReadFile(filepath.Join(f.examples, "demo.yaml"))
	if err != nil {
		r.Fatalf("%v", err)
	}
	if err := f.cli(ctx, "", "cluster", "add", "demo", "--kubeconfig", kubeconfig, "--label", "env=demo"); err != nil {
		r.Fatalf("%v", err)
	}
	if err := f.cli(ctx, strings.ReplaceAll(string(manifest), "REPO_URL", repoURL), "apply", "-f", "-"); err != nil {
		r.Fatalf("%v", err)
	}
}

// cli runs the flotilla CLI with stdin, retrying while the worker's
// Temporal server is still starting (the CLI reports it unreachable) or
// the worker has not published its sealing key yet.
func (f demoFlags) cli(ctx context.Context, stdin string, args ...string) error {
	args = append([]string{"--temporal-address", f.devListen}, args...)
	var err error
	for attempt := 0; attempt < 60; attempt++ { // the server may still be starting
		cmd := exec.CommandContext(ctx, filepath.Join(f.bin, "flotilla"), args...)
		cmd.Stdin, cmd.Stdout = strings.NewReader(stdin), os.Stdout
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err = cmd.Run()
		starting := strings.Contains(stderr.String(), "unreachable") || strings.Contains(stderr.String(), "published a sealing key")
		if err == nil || !starting {
			if err != nil {
				err = fmt.Errorf("flotilla %s: %s", strings.Join(args, " "), stderr.String())
			}
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
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
