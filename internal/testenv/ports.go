package testenv

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. It
// listens on port 0, notes the port the kernel chose and closes the listener,
// so another process may in principle take the port before the caller binds
// it; the kernel hands out ephemeral ports in rotation, which makes that rare.
// FreePort fails the test if no port can be had.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := freePorts(1)
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
	ports, err := freePorts(n)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ports
}

// freePorts is FreePorts without the testing.TB, for use from goroutines.
func freePorts(n int) (ports []int, err error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close() // Only the port number matters; a close error changes nothing.
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
