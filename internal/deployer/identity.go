package deployer

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// identity names one process among all that write releases: its host, its
// process ID, its PID namespace (so that two containers sharing a host name
// are told apart) and a random nonce (so that a reused process ID is
// another identity).
type identity struct {
	host, pidNS, nonce string
	pid                int
}

// processIdentity is this process's identity, the same for every Deployer
// in it: they share its release locks (see releaseLocks).
var processIdentity = sync.OnceValue(func() identity {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	// The PID namespace is unknown off Linux: then no holder is known gone
	// by its process ID, only by its lease.
	ns, _ := os.Readlink("/proc/self/ns/pid")
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails: crypto/rand panics instead
	return identity{host: host, pid: os.Getpid(), pidNS: strings.Trim(strings.TrimPrefix(ns, "pid:"), "[]"), nonce: hex.EncodeToString(b)}
})

// String is "host/pid/pidns/nonce", the lease holder's form.
func (i identity) String() string {
	return fmt.Sprintf("%s/%d/%s/%s", i.host, i.pid, i.pidNS, i.nonce)
}

// parseIdentity reads an identity's String; ok is false for anything else.
func parseIdentity(s string) (identity, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return identity{}, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return identity{}, false
	}
	return identity{host: parts[0], pid: pid, pidNS: parts[2], nonce: parts[3]}, true
}

// knowsGone reports whether the process holder names is known to have
// ended: it ran on this host in this PID namespace, and no process has its
// ID any more. Anything else (another host, a process that exists, even
// if the ID was reused) is not known gone.
func (i identity) knowsGone(holder string) bool {
	h, ok := parseIdentity(holder)
	if !ok || i.pidNS == "" || h.host != i.host || h.pidNS != i.pidNS {
		return false
	}
	return !processExists(h.pid)
}
