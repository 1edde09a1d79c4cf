package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/freeport"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// configs serves fixed REST configs by cluster name and counts the calls.
type configs struct {
	mu     sync.Mutex
	byName map[string]*rest.Config
	calls  int
}

func (c *configs) get(name string) (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	cfg, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("read kubeconfig: %w", ErrNotFound)
	}
	return rest.CopyConfig(cfg), nil
}

func TestConnections_Connect(t *testing.T) {
	cfgs := &configs{byName: map[string]*rest.Config{"a": {Host: "https://127.0.0.1:1"}}}
	tests := []struct {
		name      string
		only      string
		cluster   string
		wantErr   string // substring of the error; "" for none
		wantIs    error  // when set, errors.Is(err, wantIs)
		wantCalls int    // calls of Config
	}{
		{name: "any cluster", cluster: "a", wantCalls: 1},
		{name: "its own cluster", only: "a", cluster: "a", wantCalls: 1},
		{name: "another cluster than the agent's", only: "a", cluster: "b",
			wantErr: "cluster b: this worker serves only cluster a"},
		{name: "config error names the cluster", cluster: "b", wantErr: "cluster b: read kubeconfig", wantIs: ErrNotFound, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgs.calls = 0
			conns := NewConnections(ConnectionsOptions{Config: cfgs.get, Only: tt.only})
			k, err := conns.Connect(tt.cluster)
			assert.Equal(t, tt.wantCalls, cfgs.calls)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				if tt.wantIs != nil {
					require.ErrorIs(t, err, tt.wantIs)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.cluster, k.Name())
		})
	}
}

func TestNewConnections_RequiresConfig(t *testing.T) {
	assert.Panics(t, func() { NewConnections(ConnectionsOptions{}) })
}

// TestConn_Getter: getters are cached per (server, credentials) and
// namespace, and every getter of one server and credentials shares one
// discovery cache, across clusters and concurrent callers.
func TestConn_Getter(t *testing.T) {
	cfgs := &configs{byName: map[string]*rest.Config{
		"a":       {Host: "https://127.0.0.1:1", BearerToken: "one"},
		"a-alias": {Host: "https://127.0.0.1:1", BearerToken: "one"}, // a virtual cluster on a's API server
		"a-token": {Host: "https://127.0.0.1:1", BearerToken: "two"}, // same server, other credentials
		"b":       {Host: "https://127.0.0.1:2", BearerToken: "one"},
	}}
	conns := NewConnections(ConnectionsOptions{Config: cfgs.get})
	connect := func(name string) *Conn {
		t.Helper()
		k, err := conns.Connect(name)
		require.NoError(t, err)
		return k
	}

	// Many callers at once get one getter per namespace.
	a := connect("a")
	const callers = 8
	got := make([]any, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := a.Getter("ns")
			assert.NoError(t, err)
			got[i] = g
		}()
	}
	wg.Wait()
	for i := range got {
		assert.Same(t, got[0], got[i])
	}

	discoveryOf := func(k *Conn, namespace string) any {
		t.Helper()
		g, err := k.Getter(namespace)
		require.NoError(t, err)
		ns, _, err := g.ToRawKubeConfigLoader().Namespace()
		require.NoError(t, err)
		assert.Equal(t, namespace, ns)
		dc, err := g.ToDiscoveryClient()
		require.NoError(t, err)
		return dc
	}
	shared := discoveryOf(a, "ns")
	assert.Same(t, shared, discoveryOf(a, "other-ns"), "namespaces of one cluster share discovery")
	assert.Same(t, shared, discoveryOf(connect("a"), "ns"), "a new Conn reuses the cache")
	assert.Same(t, shared, discoveryOf(connect("a-alias"), "ns"), "same server and credentials share the cache")
	assert.NotSame(t, shared, discoveryOf(connect("a-token"), "ns"), "other credentials get their own cache")
	assert.NotSame(t, shared, discoveryOf(connect("b"), "ns"), "another server gets its own cache")
}

// TestConn_Reachable: Reachable's errors keep the client's error, so that
// deployer.Classify tells an unreachable API server from refused credentials.
func TestConn_Reachable(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	ports, err := freeport.Pick("127.0.0.1", 1)
	require.NoError(t, err)

	badToken := kube.RESTConfig()
	badToken.BearerToken = "not-a-token"
	closed := kube.RESTConfig()
	closed.Host = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	cfgs := &configs{byName: map[string]*rest.Config{"ok": kube.RESTConfig(), "unauthorized": badToken, "closed": closed}}
	conns := NewConnections(ConnectionsOptions{Config: cfgs.get})

	tests := []struct {
		cluster string
		want    outcome.Class
		says    string // what the error says of the API server
	}{
		{cluster: "ok", want: outcome.OK},
		{cluster: "unauthorized", want: outcome.Unauthorized, says: "refused the credentials"},
		{cluster: "closed", want: outcome.Unreachable, says: "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			k, err := conns.Connect(tt.cluster)
			require.NoError(t, err)
			err = k.Reachable(context.Background())
			assert.Equal(t, tt.want, deployer.Classify(err), "error: %v", err)

			// Open is Connect and Reachable.
			opened, err := conns.Open(context.Background(), tt.cluster)
			assert.Equal(t, tt.want, deployer.Classify(err), "error: %v", err)
			if tt.want == outcome.OK {
				assert.Equal(t, tt.cluster, opened.Name())
			} else {
				assert.Nil(t, opened)
				assert.ErrorContains(t, err, "API server "+cfgs.byName[tt.cluster].Host+" "+tt.says)
			}
		})
	}
}
