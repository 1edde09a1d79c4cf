// Package freeport picks TCP ports for servers that must be told their
// port before they bind it (Temporal's internal services, test servers).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port Pick chooses from.
const lowest = 10000

// Pick returns n distinct ports on host that can be listened on now. A port
// is checked by listening on it and closing the listener, so another
// process could still take it before the caller binds it. To make that
// unlikely, ports are drawn at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): the kernel never hands those to a
// listener on port 0 or to an outgoing connection, which is what collided
// with "listen on :0, close, reuse" when many servers start at once.
// Without a usable range below the ephemeral one, the kernel picks.
func Pick(host string, n int) ([]int, error) {
	ephemeralLow := ephemeralStart()
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close() // only the number matters
		}
	}()
	ports := make([]int, 0, n)
	draws := 0
	for len(ports) < n {
		port := 0
		if ephemeralLow > lowest+1000 {
			port = lowest + rand.IntN(ephemeralLow-lowest)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			if draws++; port != 0 && draws < 1000 {
				continue // taken: draw another
			}
			return nil, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range, 0 if
// it cannot be read.
// ephemeralStart is read once: the range does not change under a process.
var ephemeralStart = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	lo, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return lo
})
