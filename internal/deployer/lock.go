package deployer

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// releaseLocks serialise Deploy, Correct and Rollback of one release
// within a process, so a correction never races a deploy or a rollback of
// the same release. A release is a namespace and name on one API server:
// the same bundle on other clusters runs in parallel. It is per process,
// not per Deployer, because a worker runs several Deployers (deploys and
// drift corrections) that may act on one release.
var releaseLocks = &keyedMutex{locks: map[string]*refMutex{}}

// lock waits until it holds release namespace/name on the API server
// behind getter (see serverKey), and returns its unlock. It returns an
// error, holding nothing, when ctx ends first or getter has no usable REST
// config.
func (d *Deployer) lock(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string) (func(), error) {
	server, err := serverKey(getter)
	if err != nil {
		return nil, fmt.Errorf("lock release %s/%s: %w", namespace, name, err)
	}
	unlock, err := releaseLocks.lock(ctx, server+" "+namespace+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("wait for another operation on release %s/%s: %w", namespace, name, err)
	}
	return unlock, nil
}

// serverKey identifies the API server behind getter by the URL client-go
// sends requests to (host, port and the path of a proxy such as Rancher's
// /k8s/clusters/<id>), normalised: lower-case host, explicit port, no
// trailing slash. Credentials are not part of it: Helm keeps a release's
// records on the server, so two cluster names or credentials for one
// server share its releases, and must share their locks. Different
// clusters behind one URL (a proxy that routes by credentials alone) then
// share locks too, which costs parallelism, not safety.
func serverKey(getter genericclioptions.RESTClientGetter) (string, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return "", fmt.Errorf("read REST config: %w", err)
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", fmt.Errorf("API server URL: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port) + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// keyedMutex is a mutex per key. A key's mutex exists only while it is
// held or awaited, so keys of clusters and releases long gone cost nothing.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

// refMutex is a mutex that a waiter can give up on: a one-slot channel,
// full while held. refs counts its holder and waiters.
type refMutex struct {
	ch   chan struct{}
	refs int
}

// lock waits until it holds key's mutex, or ctx ends, and returns the
// unlock.
func (k *keyedMutex) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	m := k.locks[key]
	if m == nil {
		m = &refMutex{ch: make(chan struct{}, 1)}
		k.locks[key] = m
	}
	m.refs++
	k.mu.Unlock()

	select {
	case m.ch <- struct{}{}:
	case <-ctx.Done():
		k.release(key, m)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-m.ch
			k.release(key, m)
		})
	}, nil
}

// release drops a holder or waiter of key's mutex m, and m with the last.
func (k *keyedMutex) release(key string, m *refMutex) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m.refs--; m.refs == 0 {
		delete(k.locks, key)
	}
}
