package testenv

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/freeport"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (see
// freeport.Pick: drawn below the ephemeral range, so no port-0 listener or
// outgoing connection takes it before the caller binds it). FreePort fails
// the test if no port can be had.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ports[0]
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1. Unlike n calls to
// FreePort, it keeps every listener open until all n ports are chosen, so the
// ports never repeat. It fails the test if the ports cannot be had.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeport.Pick("127.0.0.1", n)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ports
}
