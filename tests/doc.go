// Package tests holds Flotilla's end-to-end and integration tests and
// benchmarks. They run against real servers on loopback: the embedded
// Temporal server, kube-apiservers built from the Go module proxy
// (hack/k8s-testbin), a Git server over smart HTTP, and real Helm.
package tests
