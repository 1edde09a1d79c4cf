package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// The Kubernetes-native door of the demo: the demo cluster is also the
// management cluster, and one GitRepo is applied to it with kubectl.
const (
	// managementNamespace holds the controller's Lease.
	managementNamespace = "flotilla-system"
	// kubectlGitRepo is the GitRepo examples/demo-kubectl.yaml defines.
	kubectlGitRepo          = "demo-kubectl"
	kubectlGitRepoNamespace = "fleet-default"
	// mirrorLabel selects the GitRepo's Bundle mirrors, as Fleet labels
	// a GitRepo's bundles.
	mirrorLabel = "fleet.cattle.io/repo-name=" + kubectlGitRepo
)

// kubectl runs the testbin's kubectl against one cluster.
type kubectl struct {
	path, kubeconfig string
}

func newKubectl(r *runner, kubeconfig string) kubectl {
	return kubectl{path: filepath.Join(testenv.Binaries(r), "kubectl"), kubeconfig: kubeconfig}
}

// run runs kubectl with args and stdin, its output on the demo's stdout.
func (k kubectl) run(ctx context.Context, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, k.path, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// prepareManagement makes the demo cluster a management cluster: Fleet's
// CRDs, as the chart's crds/ directory holds them, and the namespaces of
// the controller's Lease and of the GitRepo.
func prepareManagement(ctx context.Context, r *runner, cluster *testenv.Cluster) {
	if err := crds.Install(ctx, cluster.RESTConfig()); err != nil {
		r.Fatalf("install Fleet's CRDs: %v", err)
	}
	cs := cluster.Clientset(r)
	for _, ns := range []string{managementNamespace, kubectlGitRepoNamespace} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			r.Fatalf("create namespace %s: %v", ns, err)
		}
	}
}

// applyKubectl applies examples/demo-kubectl.yaml, its GitRepo pointing at
// repoURL, with kubectl.
func applyKubectl(ctx context.Context, r *runner, f demoFlags, k kubectl, repoURL string) {
	manifest, err := os.ReadFile(filepath.Join(f.examples, "demo-kubectl.yaml"))
	if err != nil {
		r.Fatalf("%v", err)
	}
	fmt.Println("$ kubectl apply -f examples/demo-kubectl.yaml")
	if err := k.run(ctx, strings.ReplaceAll(string(manifest), "REPO_URL", repoURL), "apply", "-f", "-"); err != nil {
		r.Fatalf("%v", err)
	}
}

// showDoors waits until the kubectl GitRepo is Ready and prints what each
// door shows of it: kubectl (Fleet's status) and the flotilla CLI (the same
// workflow's status). A GitRepo that does not become Ready is reported,
// and the demo keeps running so it can be looked at.
func showDoors(ctx context.Context, r *runner, f demoFlags, k kubectl) {
	ref := "gitrepo/" + kubectlGitRepo
	steps := []struct {
		show string
		run  func() error
	}{
		{"kubectl wait --for=condition=Ready " + ref + " -n " + kubectlGitRepoNamespace, func() error {
			return k.run(ctx, "", "wait", "--for=condition=Ready", ref, "-n", kubectlGitRepoNamespace, "--timeout=3m")
		}},
		{"kubectl get gitrepos -A", func() error { return k.run(ctx, "", "get", "gitrepos", "-A") }},
		// A mirror gets its status on the sync after its creation.
		{"kubectl wait --for=jsonpath={.status.display.state}=Ready bundles -l " + mirrorLabel + " -n " + kubectlGitRepoNamespace, func() error {
			return k.run(ctx, "", "wait", "--for=jsonpath={.status.display.state}=Ready", "bundles", "-l", mirrorLabel,
				"-n", kubectlGitRepoNamespace, "--timeout=1m")
		}},
		{"kubectl get bundles -A", func() error { return k.run(ctx, "", "get", "bundles", "-A") }},
		{"kubectl get events -n " + kubectlGitRepoNamespace, func() error { return k.run(ctx, "", "get", "events", "-n", kubectlGitRepoNamespace) }},
		{"bin/flotilla status " + kubectlGitRepo, func() error { return f.cli(ctx, "", "status", kubectlGitRepo) }},
	}
	fmt.Println("\nThe GitRepo applied with kubectl, through both doors:")
	for _, s := range steps {
		fmt.Printf("\n$ %s\n", s.show)
		if err := s.run(); err != nil {
			r.Logf("%v", err)
			return
		}
	}
}
