// Package testenv starts real servers for tests: free loopback ports, child
// processes that are always cleaned up, and Kubernetes clusters made of real
// etcd and kube-apiserver processes (optionally with kube-controller-manager,
// kube-scheduler and kwok, see Options.Sim).
//
// The package is for tests only. It calls t.Fatal, t.Skip and t.Cleanup on
// the testing.TB it is given, never on another goroutine's behalf, and it
// never dials anything but 127.0.0.1.
//
// The Kubernetes binaries come from Binaries, which builds them once per
// machine with hack/k8s-testbin/build.sh (the first build takes about
// 7–12 minutes) unless FLOTILLA_TESTBIN names a directory that already holds
// them. Helpers that need the binaries skip the test under `go test -short`.
//
// Child processes run in their own process group. On Linux they also receive
// SIGKILL when the test binary dies, so a `go test -timeout` panic does not
// leave servers behind.
//
// A typical test:
//
//	func TestSomething(t *testing.T) {
//		clusters := testenv.StartClusters(t, 2, testenv.Options{})
//		cs := clusters[0].Clientset(t)
//		// ...
//	}
package testenv
