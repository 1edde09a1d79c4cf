package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/freeport"
)

const (
	// FakeNodeName is the name of the one Node that kwok manages in every
	// cluster started with Options.Sim.
	FakeNodeName = "kwok-node-0"
	// kwokNodeAnnotation marks the Nodes that kwok manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// checkSimBinaries reports whether the testbin directory holds everything
// Options.Sim needs.
func (e clusterEnv) checkSimBinaries() error {
	for _, name := range []string{binControllerManager, binScheduler, binKwok} {
		if err := checkExecutable(filepath.Join(e.bin, name)); err != nil {
			return fmt.Errorf("testbin directory %s: %w", e.bin, err)
		}
	}
	if _, err := e.kwokStageFiles(); err != nil {
		return err
	}
	return nil
}

// kwokStageFiles lists the Stage configs that build.sh copied from the kwok
// module (node/fast, node/heartbeat-with-lease, pod/fast).
func (e clusterEnv) kwokStageFiles() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(e.bin, kwokStagesDir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing kwok stages: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no kwok stage configs in %s", filepath.Join(e.bin, kwokStagesDir))
	}
	return files, nil
}

// startSim starts kube-controller-manager, kube-scheduler and kwok for c,
// registers the fake Node, and waits until the controllers run, the
// scheduler is healthy and the Node is Ready.
func startSim(ctx context.Context, t testing.TB, env clusterEnv, c *Cluster, dir string, files clusterFiles) error {
	ports, err := freeport.Pick("127.0.0.1", 3)
	if err != nil {
		return err
	}
	stages, err := env.kwokStageFiles()
	if err != nil {
		return err
	}
	kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2]
	specs := []ProcessOptions{
		{
			Name: "kube-controller-manager-" + c.Name,
			Path: filepath.Join(env.bin, binControllerManager),
			Args: controllerManagerArgs(kcmPort, dir, files),
		},
		{
			Name: "kube-scheduler-" + c.Name,
			Path: filepath.Join(env.bin, binScheduler),
			Args: schedulerArgs(schedPort, dir, files),
		},
		{
			Name: "kwok-" + c.Name,
			Path: filepath.Join(env.bin, binKwok),
			Args: kwokArgs(kwokPort, files, stages),
			// kwok also reads ~/.kwok/kwok.yaml; keep a developer's file out.
			Env: []string{"HOME=" + dir},
		},
	}
	procs := make([]*Process, len(specs))
	for i, spec := range specs {
		spec.Dir = dir
		if procs[i], err = startProcess(t, spec); err != nil {
			return err
		}
	}

	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("building clientset: %w", err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(FakeNodeName), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating fake node: %w", err)
	}

	// The components serve self-signed certificates on loopback; only the
	// always-allowed /healthz path is probed.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // Loopback health probe.
	defer insecure.CloseIdleConnections()
	checks := []func(context.Context) error{
		// kube-controller-manager answers /healthz about 5s before its
		// controllers run (it first mints a token per controller); they all
		// start together, so the root CA ConfigMap marks the real start.
		allChecks(
			httpCheck(insecure, "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz"),
			configMapCheck(cs, metav1.NamespaceDefault, "kube-root-ca.crt"),
		),
		httpCheck(insecure, "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz"),
		nodeReadyCheck(cs, FakeNodeName),
	}
	for i, p := range procs {
		if err := p.WaitReady(ctx, checks[i]); err != nil {
			return err
		}
	}
	return nil
}

// controllerManagerArgs returns kube-controller-manager's flags. All default
// controllers run; Kubernetes 1.37 no longer has the cloud controllers in
// kube-controller-manager, so there are none to turn off.
func controllerManagerArgs(port int, dir string, files clusterFiles) []string {
	return []string{
		"--kubeconfig=" + files.kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
		"--controllers=*",
		"--service-account-private-key-file=" + files.saKeyFile,
		"--root-ca-file=" + files.caFile,
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--leader-elect=false",
	}
}

// schedulerArgs returns kube-scheduler's flags.
func schedulerArgs(port int, dir string, files clusterFiles) []string {
	return []string{
		"--kubeconfig=" + files.kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "scheduler-certs"),
		"--leader-elect=false",
	}
}

// kwokArgs returns kwok's flags. kwok reports 127.0.0.1 and its own server
// port as the Node's kubelet endpoint, so even a stray kubelet call (logs,
// exec) stays on loopback.
func kwokArgs(port int, files clusterFiles, stages []string) []string {
	args := []string{
		"--kubeconfig=" + files.kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(port),
		// The heartbeat stage refreshes conditions only every ~10 min; the
		// lease keeps the node-lifecycle controller from marking it NotReady.
		"--node-lease-duration-seconds=40",
	}
	for _, s := range stages {
		args = append(args, "--config="+s)
	}
	return args
}

// fakeNode returns a taint-free Node for kwok to manage, with room for
// plenty of pods.
func fakeNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       corev1.NodeRunning,
		},
	}
}

// configMapCheck returns a readiness check that wants the ConfigMap to exist.
func configMapCheck(cs kubernetes.Interface, namespace, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		if _, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("getting ConfigMap %s/%s: %w", namespace, name, err)
		}
		return nil
	}
}

// allChecks returns a readiness check that runs checks in order and fails
// with the first error.
func allChecks(checks ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, check := range checks {
			if err := check(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// nodeReadyCheck returns a readiness check that wants the Node's Ready
// condition to be True.
func nodeReadyCheck(cs kubernetes.Interface, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s: %w", name, err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s: Ready=%s (%s)", name, cond.Status, cond.Message)
			}
		}
		return errors.New("node " + name + " has no Ready condition yet")
	}
}
