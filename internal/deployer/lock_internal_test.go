package deployer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// blockedFor is how long a lock must wait to count as blocked. A lock that
// should not block gets far longer (unblockedWithin) to succeed.
const (
	blockedFor      = 50 * time.Millisecond
	unblockedWithin = 10 * time.Second
)

// lockTarget is one release as a caller names it: a REST config and a
// namespace and name.
type lockTarget struct {
	cfg             *rest.Config
	namespace, name string
}

func TestLockIsPerServerAndRelease(t *testing.T) {
	a := &rest.Config{Host: "https://a.example.com:6443", BearerToken: "token-a"}
	b := &rest.Config{Host: "https://b.example.com:6443", BearerToken: "token-a"}
	tests := []struct {
		name string
		// first is locked first; second then waits for it when shared.
		first, second lockTarget
		shared        bool
	}{
		{name: "same release on the same cluster",
			first: lockTarget{a, "apps", "web"}, second: lockTarget{a, "apps", "web"}, shared: true},
		{name: "same release on different clusters",
			first: lockTarget{a, "apps", "web"}, second: lockTarget{b, "apps", "web"}},
		{name: "two cluster names for one server, other credentials",
			first:  lockTarget{a, "apps", "web"},
			second: lockTarget{&rest.Config{Host: "https://a.example.com:6443", BearerToken: "token-b"}, "apps", "web"}, shared: true},
		{name: "one server spelled differently",
			first:  lockTarget{&rest.Config{Host: "https://API.example.com:443/"}, "apps", "web"},
			second: lockTarget{&rest.Config{Host: "https://api.example.com"}, "apps", "web"}, shared: true},
		{name: "clusters behind one Rancher server",
			first:  lockTarget{&rest.Config{Host: "https://rancher.example.com/k8s/clusters/c-1"}, "apps", "web"},
			second: lockTarget{&rest.Config{Host: "https://rancher.example.com/k8s/clusters/c-2"}, "apps", "web"}},
		{name: "other release on the same cluster",
			first: lockTarget{a, "apps", "web"}, second: lockTarget{a, "apps", "db"}},
		{name: "same name in another namespace",
			first: lockTarget{a, "apps", "web"}, second: lockTarget{a, "other", "web"}},
	}
	d := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			first, second := targetGetter(t, tt.first), targetGetter(t, tt.second)
			unlock, err := d.lock(ctx, first, tt.first.namespace, tt.first.name)
			require.NoError(t, err)

			if tt.shared {
				waitCtx, cancel := context.WithTimeout(ctx, blockedFor)
				_, err := d.lock(waitCtx, second, tt.second.namespace, tt.second.name)
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded, "second lock must wait for the first")
				unlock()
			}
			waitCtx, cancel := context.WithTimeout(ctx, unblockedWithin)
			defer cancel()
			unlock2, err := d.lock(waitCtx, second, tt.second.namespace, tt.second.name)
			require.NoError(t, err, "second lock")
			unlock2()
			if !tt.shared {
				unlock()
			}
			for _, target := range []lockTarget{tt.first, tt.second} {
				assert.False(t, lockHeld(t, target), "mutex of %s/%s kept after unlock", target.namespace, target.name)
			}
		})
	}
}

func TestServerKey(t *testing.T) {
	tests := []struct {
		cfg  *rest.Config
		want string
	}{
		{&rest.Config{Host: "https://10.0.0.1:6443"}, "10.0.0.1:6443"},
		{&rest.Config{Host: "https://Cluster.Example.com/"}, "cluster.example.com:443"},
		{&rest.Config{Host: "http://cluster.example.com"}, "cluster.example.com:80"},
		{&rest.Config{Host: "https://[::1]:6443"}, "[::1]:6443"},
		// client-go's own default: https when TLS is configured.
		{&rest.Config{Host: "cluster.example.com", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, "cluster.example.com:443"},
		{&rest.Config{Host: "cluster.example.com"}, "cluster.example.com:80"},
		{&rest.Config{Host: "https://rancher.example.com/k8s/clusters/c-m-1/"}, "rancher.example.com:443/k8s/clusters/c-m-1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got, err := serverKey(targetGetter(t, lockTarget{cfg: tt.cfg}))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// targetGetter returns a getter for target's REST config; nothing is
// dialled.
func targetGetter(t *testing.T, target lockTarget) *RESTClientGetter {
	t.Helper()
	g, err := NewRESTClientGetter(target.cfg, "default")
	require.NoError(t, err)
	return g
}

// lockHeld reports whether releaseLocks still has a mutex for target.
func lockHeld(t *testing.T, target lockTarget) bool {
	t.Helper()
	server, err := serverKey(targetGetter(t, target))
	require.NoError(t, err)
	releaseLocks.mu.Lock()
	defer releaseLocks.mu.Unlock()
	_, ok := releaseLocks.locks[server+" "+target.namespace+"/"+target.name]
	return ok
}
