package testenv

import (
	"bytes"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NamespaceProxy serves many virtual clusters from one API server, each
// under a URL of its own, all of them with a namespace of the same name
// that is a different namespace on the API server for each. It lets a
// test run hundreds of clusters that each hold a release of the same name
// in the same namespace, which the same API server cannot hold twice,
// with one kube-apiserver instead of hundreds.
//
// Virtual cluster NAME is https://127.0.0.1:PORT/vc/NAME: a server URL
// with a path, as behind Rancher's /k8s/clusters/ID proxy, so that every
// virtual cluster has a URL of its own. Requests are passed to the API
// server with the proxy's own credentials (the virtual cluster's token is
// not checked), with the shared namespace's name replaced by the virtual
// cluster's backing namespace in the path, query and body, and the other
// way round in the response, watch streams included. Every other
// namespace, and every cluster-scoped object (CRDs, ClusterRoles), is the
// API server's and shared by all virtual clusters.
//
// The replacement is textual, so the names must not occur in anything
// else, and a backing namespace has the shared namespace's length: then
// protobuf encodings and Content-Length stay valid. Listing namespaces
// shows every backing namespace under its own name.
type NamespaceProxy struct {
	// Shared is the namespace name every virtual cluster shows.
	Shared string

	upstream  *url.URL
	transport http.RoundTripper
	srv       *httptest.Server
	caData    []byte
	dir       string

	mu     sync.RWMutex
	routes map[string]*httputil.ReverseProxy
}

// VirtualCluster is one cluster a NamespaceProxy serves.
type VirtualCluster struct {
	// Name names the cluster; it is the last element of Server.
	Name string
	// Server is its URL, https://127.0.0.1:PORT/vc/NAME.
	Server string
	// Backing is the API server's namespace behind the shared namespace.
	Backing string
	// KubeconfigPath is a kubeconfig file for it (embedded CA).
	KubeconfigPath string
}

// vcPrefix starts the path of every virtual cluster.
const vcPrefix = "/vc/"

// StartNamespaceProxy starts a proxy in front of upstream whose virtual
// clusters show namespace shared; Add adds them. It is stopped in
// t.Cleanup.
func StartNamespaceProxy(t testing.TB, upstream *Cluster, shared string) *NamespaceProxy {
	t.Helper()
	cfg := upstream.RESTConfig()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatalf("testenv: namespace proxy: transport to %s: %v", upstream.Name, err)
	}
	u, err := url.Parse(upstream.Server)
	if err != nil {
		t.Fatalf("testenv: namespace proxy: %v", err)
	}
	p := &NamespaceProxy{Shared: shared, upstream: u, transport: rt, dir: t.TempDir(),
		routes: map[string]*httputil.ReverseProxy{}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serveHTTP))
	p.srv.EnableHTTP2 = true
	// A client that goes away mid-watch is routine, not worth a log line.
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.StartTLS()
	t.Cleanup(func() {
		// Clients still watching (a worker stopped after the proxy) would
		// keep Close waiting for their requests forever.
		_ = p.srv.Listener.Close()
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	p.caData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return p
}

// Add adds virtual cluster name whose shared namespace is namespace
// backing on the API server, and writes its kubeconfig.
func (p *NamespaceProxy) Add(t testing.TB, name, backing string) *VirtualCluster {
	t.Helper()
	if len(backing) != len(p.Shared) || backing == p.Shared {
		t.Fatalf("testenv: namespace proxy: backing namespace %q must differ from %q and have its length", backing, p.Shared)
	}
	if name == "" || strings.Contains(name, "/") {
		t.Fatalf("testenv: namespace proxy: bad virtual cluster name %q", name)
	}
	vc := &VirtualCluster{Name: name, Server: p.srv.URL + vcPrefix + name, Backing: backing,
		KubeconfigPath: filepath.Join(p.dir, name+".kubeconfig")}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: vc.Server, CertificateAuthorityData: p.caData}
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: "virtual-" + name}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: adminUser}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err == nil {
		err = os.WriteFile(vc.KubeconfigPath, data, 0o600)
	}
	if err != nil {
		t.Fatalf("testenv: namespace proxy: kubeconfig of %s: %v", name, err)
	}
	p.mu.Lock()
	p.routes[name] = p.reverseProxy(vc)
	p.mu.Unlock()
	return vc
}

func (p *NamespaceProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, vcPrefix)
	name, _, _ := strings.Cut(rest, "/")
	p.mu.RLock()
	rp := p.routes[name]
	p.mu.RUnlock()
	if !ok || rp == nil {
		http.Error(w, "no such virtual cluster", http.StatusNotFound)
		return
	}
	rp.ServeHTTP(w, r)
}

// reverseProxy is vc's half of the proxy.
func (p *NamespaceProxy) reverseProxy(vc *VirtualCluster) *httputil.ReverseProxy {
	shared, backing := []byte(p.Shared), []byte(vc.Backing)
	prefix := vcPrefix + vc.Name
	return &httputil.ReverseProxy{
		Transport:     p.transport,
		FlushInterval: -1, // watches: every event as it comes
		ErrorLog:      log.New(io.Discard, "", 0),
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host, out.Host = p.upstream.Scheme, p.upstream.Host, p.upstream.Host
			path := strings.TrimPrefix(pr.In.URL.Path, prefix)
			if path == "" {
				path = "/"
			}
			out.URL.Path = strings.ReplaceAll(path, p.Shared, vc.Backing)
			out.URL.RawPath = ""
			out.URL.RawQuery = strings.ReplaceAll(pr.In.URL.RawQuery, p.Shared, vc.Backing)
			// The proxy's transport authenticates; it compresses and
			// decompresses itself, so the bodies it hands over are plain.
			out.Header.Del("Authorization")
			out.Header.Del("Accept-Encoding")
			if out.Body != nil && out.Body != http.NoBody {
				out.Body = &replacer{r: out.Body, old: shared, new: backing}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &replacer{r: resp.Body, old: backing, new: shared}
			return nil
		},
	}
}

// replacer reads r with every occurrence of old replaced by new (of the
// same length). It returns what it has as soon as it has it, holding back
// only a tail that may be the start of old, so that a watch stream's
// events pass at once.
type replacer struct {
	r        io.ReadCloser
	old, new []byte
	chunk    []byte // what r's reads go to
	buf      []byte // read from r, not yet scanned: a possible start of old
	out      []byte // scanned and replaced, not yet returned
	err      error
}

func (x *replacer) Read(p []byte) (int, error) {
	for len(x.out) == 0 {
		if x.err != nil {
			if len(x.buf) == 0 {
				return 0, x.err
			}
			x.out, x.buf = bytes.ReplaceAll(x.buf, x.old, x.new), nil
			break
		}
		if x.chunk == nil {
			x.chunk = make([]byte, 32<<10)
		}
		// x.out may point into x.chunk: it is empty here.
		n, err := x.r.Read(x.chunk)
		x.err = err
		data := x.chunk[:n]
		if len(x.buf) > 0 {
			data = append(x.buf, data...)
		}
		x.out, x.buf = x.replace(data, err != nil)
	}
	n := copy(p, x.out)
	x.out = x.out[n:]
	return n, nil
}

// replace returns data with old replaced, up to a tail after the last
// replacement that may be the start of old (none when final), and that
// tail.
func (x *replacer) replace(data []byte, final bool) (out, tail []byte) {
	if !bytes.Contains(data, x.old) && (final || partialSuffix(data, x.old) == 0) {
		return data, nil // the common case: nothing to copy
	}
	for {
		i := bytes.Index(data, x.old)
		if i < 0 {
			break
		}
		out = append(append(out, data[:i]...), x.new...)
		data = data[i+len(x.old):]
	}
	keep := 0
	if !final {
		keep = partialSuffix(data, x.old)
	}
	return append(out, data[:len(data)-keep]...), bytes.Clone(data[len(data)-keep:])
}

func (x *replacer) Close() error { return x.r.Close() }

// partialSuffix is the length of the longest tail of data that is a
// proper prefix of token (it may become token with more data).
func partialSuffix(data, token []byte) int {
	for k := min(len(token)-1, len(data)); k > 0; k-- {
		if bytes.Equal(token[:k], data[len(data)-k:]) {
			return k
		}
	}
	return 0
}
