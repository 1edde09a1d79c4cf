package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/internal/freeport"
)

const (
	// defaultStartTimeout is Options.StartTimeout's default.
	defaultStartTimeout = 2 * time.Minute
	// checkTimeout bounds one readiness probe.
	checkTimeout = 2 * time.Second
	// serviceCIDR is the cluster's service range. No address in it is ever
	// dialled: the endpoint reconciler is off and no webhooks are registered.
	serviceCIDR = "10.0.0.0/24"
	// adminUser is the user the bearer token authenticates as.
	adminUser = "admin"
)

// Options configures StartClusters. The zero value starts bare API servers.
type Options struct {
	// Sim also starts, per cluster, kube-controller-manager, kube-scheduler
	// and kwok with one fake Node, so that Deployments become Available,
	// garbage collection runs and namespaces finish terminating. It costs
	// about 300 MiB more per cluster.
	// Optional: default false (API server only: nothing reconciles objects).
	Sim bool
	// StartTimeout bounds starting etcd and then all clusters, including
	// their readiness checks.
	// Optional: default 2m.
	StartTimeout time.Duration
}

// applyDefaults fills in the documented defaults.
func (o *Options) applyDefaults() {
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
}

// Cluster is one Kubernetes API server started by StartClusters. All
// clusters of one StartClusters call share an etcd, each under its own key
// prefix, and are isolated from each other. The caller authenticates as a
// member of system:masters.
type Cluster struct {
	// Name is "cluster-1", "cluster-2", … in start order; it is also the
	// kubeconfig's cluster and context name.
	Name string
	// Server is the API server's URL, https://127.0.0.1:<port>.
	Server string
	// KubeconfigPath is a kubeconfig file for the cluster (bearer token,
	// embedded CA), inside the test's temporary directory.
	KubeconfigPath string
	// Kubeconfig is the content of KubeconfigPath.
	Kubeconfig []byte

	caData []byte
	token  string

	// owner, apiserver and the fields below let Stop and Start run the
	// same API server again (same port, flags, certificates and etcd
	// prefix). owner is the test StartClusters was given: a restarted
	// server belongs to it, not to the subtest that restarts it.
	owner     testing.TB
	mu        sync.Mutex
	apiserver *Process
	spec      ProcessOptions
	port      int
	caFile    string
	starts    int
}

// RESTConfig returns a new rest.Config for the cluster, which the caller may
// modify. Its rate limits (QPS 50, burst 100) suit tests.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.Server,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: bytes.Clone(c.caData)},
		QPS:             50,
		Burst:           100,
	}
}

// Clientset returns a new client-go clientset for the cluster and fails the
// test if it cannot be built.
func (c *Cluster) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatalf("testenv: building clientset for %s: %v", c.Name, err)
	}
	return cs
}

// StartClusters starts one etcd and n Kubernetes API servers on 127.0.0.1
// (plus the Options.Sim components) and returns them once every cluster is
// ready: /readyz answers ok and the default namespace exists. The API servers
// start in parallel. Everything is stopped in t.Cleanup; if the test failed,
// the tail of every server's log is logged first.
//
// StartClusters skips the test in -short mode and fails it if the clusters
// are not ready within Options.StartTimeout. The first call on a machine may
// build the binaries first (see Binaries), which StartTimeout does not cover.
func StartClusters(t testing.TB, n int, opts Options) []*Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("testenv: skipping Kubernetes clusters in -short mode")
	}
	if n < 1 {
		t.Fatalf("testenv: StartClusters needs n >= 1, got %d", n)
	}
	opts.applyDefaults()
	env := clusterEnv{bin: Binaries(t), root: t.TempDir(), opts: opts}
	if opts.Sim {
		if err := env.checkSimBinaries(); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	etcdURL, err := startEtcd(ctx, t, env)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	env.etcdURL = etcdURL

	clusters := make([]*Cluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { clusters[i], errs[i] = startCluster(ctx, t, env, i+1) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testenv: starting %d cluster(s): %v", n, err)
	}
	return clusters
}

// clusterEnv is what every cluster of one StartClusters call shares.
type clusterEnv struct {
	bin     string // testbin directory
	root    string // temporary directory for all servers
	etcdURL string
	opts    Options
}

// startEtcd starts a single-member etcd without fsync and waits for /health.
func startEtcd(ctx context.Context, t testing.TB, env clusterEnv) (string, error) {
	ports, err := freeport.Pick("127.0.0.1", 2)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(env.root, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating etcd directory: %w", err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	p, err := startProcess(t, ProcessOptions{
		Name: "etcd",
		Path: filepath.Join(env.bin, binEtcd),
		Dir:  dir,
		Args: []string{
			"--name=testenv",
			"--data-dir=" + filepath.Join(dir, "data"),
			"--unsafe-no-fsync",
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=testenv=" + peerURL,
			"--log-level=warn",
		},
	})
	if err != nil {
		return "", err
	}
	if err := p.WaitReady(ctx, httpCheck(http.DefaultClient, clientURL+"/health")); err != nil {
		return "", fmt.Errorf("waiting for etcd: %w", err)
	}
	return clientURL, nil
}

// clusterFiles are the credentials written for one cluster.
type clusterFiles struct {
	token      string
	tokenFile  string
	saKeyFile  string // RSA private key, PKCS#1 PEM
	saPubFile  string // RSA public key, PKIX PEM
	certDir    string // kube-apiserver writes apiserver.crt here
	caFile     string // cert-dir/apiserver.crt
	kubeconfig string
}

// startCluster starts the API server of cluster number idx (and, in sim
// mode, its companions) and waits until it is ready.
func startCluster(ctx context.Context, t testing.TB, env clusterEnv, idx int) (*Cluster, error) {
	name := "cluster-" + strconv.Itoa(idx)
	dir := filepath.Join(env.root, name)
	files, err := writeClusterFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &Cluster{
		Name:           name,
		Server:         "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		KubeconfigPath: files.kubeconfig,
		token:          files.token,
	}
	c.owner, c.port, c.caFile = t, ports[0], files.caFile
	c.spec = ProcessOptions{
		Name: "kube-apiserver-" + name,
		Path: filepath.Join(env.bin, binKubeAPIServer),
		Dir:  dir,
		Args: apiserverArgs(env.etcdURL, idx, ports[0], files),
	}
	if err := c.startAPIServer(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if env.opts.Sim {
		if err := startSim(ctx, t, env, c, dir, files); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return c, nil
}

// startAPIServer starts the cluster's API server from c.spec and waits
// until it is ready. A restart writes its output to a log file of its own
// (kube-apiserver-<name>-2.log, ...), so earlier logs are kept.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	spec := c.spec
	c.starts++
	if c.starts > 1 {
		spec.Name += "-" + strconv.Itoa(c.starts)
	}
	p, err := startProcess(c.owner, spec)
	if err != nil {
		return err
	}
	c.apiserver = p
	return p.WaitReady(ctx, c.apiserverCheck(c.port, c.caFile))
}

// Stop stops the cluster's API server (SIGTERM, then SIGKILL after the
// grace period): clients then get "connection refused" from Server. etcd
// and, with Options.Sim, the controllers keep running. Stop on a stopped
// cluster does nothing.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil {
		c.apiserver.Stop()
	}
}

// Start starts the API server Stop stopped, on the same port with the
// same flags, serving certificate, service-account keys and etcd data, so
// KubeconfigPath, RESTConfig and tokens issued before stay valid. It
// waits until the server is ready (StartTimeout's default bounds the
// wait) and fails t otherwise. The new process belongs to the test that
// called StartClusters, so it outlives a calling subtest. Start on a
// running cluster does nothing.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil {
		select {
		case <-c.apiserver.Done():
		default:
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultStartTimeout)
	defer cancel()
	if err := c.startAPIServer(ctx); err != nil {
		t.Fatalf("testenv: restarting %s: %v", c.Name, err)
	}
}

// apiserverArgs returns kube-apiserver's flags for cluster number idx.
func apiserverArgs(etcdURL string, idx, port int, files clusterFiles) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--etcd-prefix=/c" + strconv.Itoa(idx),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + files.certDir,
		"--token-auth-file=" + files.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + files.saPubFile,
		"--service-account-signing-key-file=" + files.saKeyFile,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		// The default reconciler rewrites the kubernetes Service's endpoints
		// and complains every 10s that 127.0.0.1 is a loopback address.
		"--endpoint-reconciler-type=none",
	}
}

// writeClusterFiles creates dir with a random admin token and a fresh
// service-account key pair.
func writeClusterFiles(dir string) (clusterFiles, error) {
	f := clusterFiles{
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		saKeyFile:  filepath.Join(dir, "sa.key"),
		saPubFile:  filepath.Join(dir, "sa.pub"),
		certDir:    filepath.Join(dir, "certs"),
		kubeconfig: filepath.Join(dir, "kubeconfig"),
	}
	f.caFile = filepath.Join(f.certDir, "apiserver.crt")
	if err := os.MkdirAll(f.certDir, 0o700); err != nil {
		return f, fmt.Errorf("creating cluster directory: %w", err)
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return f, fmt.Errorf("generating token: %w", err)
	}
	f.token = hex.EncodeToString(secret)
	line := f.token + "," + adminUser + "," + adminUser + ",system:masters\n"
	if err := os.WriteFile(f.tokenFile, []byte(line), 0o600); err != nil {
		return f, fmt.Errorf("writing token file: %w", err)
	}
	if err := writeServiceAccountKeys(f.saKeyFile, f.saPubFile); err != nil {
		return f, err
	}
	return f, nil
}

// writeServiceAccountKeys writes a new 2048-bit RSA key pair as PEM.
func writeServiceAccountKeys(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing service-account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pubPEM, 0o600); err != nil {
		return fmt.Errorf("writing service-account public key: %w", err)
	}
	return nil
}

// apiserverCheck returns a readiness check for the API server on port. The
// server writes its self-signed certificate to caFile before it listens, so
// the check reads caFile only once the port accepts connections.
func (c *Cluster) apiserverCheck(port int, caFile string) func(context.Context) error {
	var cs kubernetes.Interface
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		if cs == nil {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				return fmt.Errorf("connecting: %w", err)
			}
			_ = conn.Close() // The probe only needed the port to be open.
			ca, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("reading serving certificate: %w", err)
			}
			c.caData = ca
			if cs, err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
				return fmt.Errorf("building clientset: %w", err)
			}
		}
		if body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return fmt.Errorf("GET /readyz: %w: %s", err, body)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("getting the default namespace: %w", err)
		}
		return nil
	}
}

// writeKubeconfig renders the cluster's kubeconfig and writes it to
// KubeconfigPath.
func (c *Cluster) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.caData}
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: c.token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: adminUser}
	cfg.CurrentContext = c.Name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig: %w", err)
	}
	if err := os.WriteFile(c.KubeconfigPath, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	c.Kubeconfig = data
	return nil
}

// httpCheck returns a readiness check that wants 200 OK from GET url.
func httpCheck(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("building request: %w", err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// ServiceAccountKubeconfig creates the ServiceAccount name in namespace
// (creating the namespace when missing), binds it to cluster-admin, and
// writes a kubeconfig that authenticates as it with a token from the
// TokenRequest API (valid for an hour). The path is returned. Deleting the
// ServiceAccount revokes the token: the API server then answers 401
// Unauthorized to it, within about 10 s (it caches authenticated tokens
// that long). The objects are left in place at the test's end.
func (c *Cluster) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := c.Clientset(t)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: %s: creating namespace %s: %v", c.Name, namespace, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: %s: creating ServiceAccount %s/%s: %v", c.Name, namespace, name, err)
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name + "-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: %s: binding %s/%s to cluster-admin: %v", c.Name, namespace, name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: %s: requesting a token for %s/%s: %v", c.Name, namespace, name, err)
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: user}
	cfg.CurrentContext = c.Name
	path := filepath.Join(t.TempDir(), c.Name+"-"+namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("testenv: writing kubeconfig of %s/%s: %v", namespace, name, err)
	}
	return path
}
