package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/buildinfo"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/envflag"
	"github.com/flotilla-gitops/flotilla/internal/gateway"
	"github.com/flotilla-gitops/flotilla/internal/logging"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// agentOptions configure `flotilla-worker agent`.
type agentOptions struct {
	Temporal    temporalx.ClientOptions
	Log         logging.Options
	Registry    registryFlags
	Cluster     string
	Kubeconfig  string
	KubeContext string
	StateDir    string
	// Token (or TokenFile) registers a new cluster; ignored once the
	// cluster is registered.
	Token             string
	TokenFile         string
	Labels            []string
	HeartbeatInterval time.Duration
	HTTPListen        string
	// Pprof serves Go's profiles under /debug/pprof/ on HTTPListen.
	Pprof                   bool
	MaxConcurrentActivities int
	// Gateway: Temporal.Address is a controller's agents' gateway, which
	// the agent reaches with its cluster's credential (CredentialFile,
	// or Temporal.APIKey/APIKeyFile) and nothing else.
	Gateway        bool
	CredentialFile string
}

func newAgentCommand() *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent --cluster NAME --temporal-address HOST:PORT",
		Short: "Run one cluster's agent (pull mode): deploy, check and clean up bundles on it from task queue cluster/NAME",
		Long: `The agent serves the deploy, readiness, rollback and cleanup activities of one cluster,
polling the Temporal task queue cluster/NAME, so the controller needs no access to the
cluster. It talks to the cluster with in-cluster config, or --kubeconfig. A new cluster
registers once with a token from "flotilla cluster token create"; later starts need none.
The agent heartbeats to its ClusterWorkflow; a silent agent turns the cluster Offline.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PreRunE:       func(cmd *cobra.Command, _ []string) error { return envflag.Apply(cmd.Flags(), envPrefix) },
		RunE:          untilSignal(func(ctx context.Context) error { return runAgent(ctx, o) }),
	}
	fs := cmd.Flags()
	o.Temporal.BindFlags(fs)
	o.Log.BindFlags(fs)
	o.Registry.bindFlags(fs, "agents pull from it")
	fs.StringVar(&o.Cluster, "cluster", "", "name of the cluster this agent serves (required)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: in-cluster config)")
	fs.StringVar(&o.KubeContext, "context", "", "kubeconfig context (default: current)")
	fs.StringVar(&o.StateDir, "state-dir", "/var/lib/flotilla", "directory for the agent's cache of rendered bundles")
	fs.StringVar(&o.Token, "registration-token", "", "registration token of a new cluster (prefer $FLOTILLA_REGISTRATION_TOKEN or --registration-token-file)")
	fs.StringVar(&o.TokenFile, "registration-token-file", "", "file holding the registration token")
	fs.StringArrayVarP(&o.Labels, "label", "l", nil, "cluster label k=v sent when registering; repeatable")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", 30*time.Second, "how often the agent reports to its ClusterWorkflow; 3 missed heartbeats make the cluster Offline")
	fs.StringVar(&o.HTTPListen, "http-listen", "", `host:port serving /healthz, /readyz and /metrics ("" disables)`)
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --http-listen (go tool pprof http://ADDR/debug/pprof/profile)")
	fs.IntVar(&o.MaxConcurrentActivities, "max-concurrent-activities", 20, "activities the agent runs at once")
	fs.BoolVar(&o.Gateway, "gateway", false, "--temporal-address is a Flotilla controller's agents' gateway (--gateway-listen): the agent authenticates with its own cluster's credential (--api-key-file, or the one its registration stored in --credential-file), holds no Temporal credentials, payload keys or registry credentials, and fetches content through the gateway")
	fs.StringVar(&o.CredentialFile, "credential-file", "", "with --gateway: where the cluster's credential from its registration is kept (default: in a pod, the Secret flotilla-agent-credential in the pod's namespace; outside one, <state-dir>/credential)")
	envflag.Annotate(fs, envPrefix)
	return cmd
}

func (o *agentOptions) validate() (map[string]string, error) {
	var errs []error
	if o.Cluster == "" {
		errs = append(errs, errors.New("--cluster is required"))
	}
	if o.Temporal.Address == "" {
		errs = append(errs, errors.New("--temporal-address is required: the agent connects to the controller's Temporal server"))
	}
	if o.HeartbeatInterval < time.Second {
		errs = append(errs, errors.New("--heartbeat-interval must be at least 1s"))
	}
	if o.MaxConcurrentActivities < 1 {
		errs = append(errs, errors.New("--max-concurrent-activities must be ≥ 1"))
	}
	labels := map[string]string{}
	for _, l := range o.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("--label %q: want k=v", l))
			continue
		}
		labels[k] = v
	}
	if o.Cluster != "" {
		if fe := api.ValidateClusterMeta(api.ObjectMeta{Name: o.Cluster, Labels: labels}); len(fe) > 0 {
			errs = append(errs, &api.ValidationError{Kind: api.KindCluster, Name: o.Cluster, Errs: fe})
		}
	}
	errs = append(errs, o.Temporal.Validate())
	if o.Gateway && (o.Temporal.PayloadKeys != "" || o.Registry.URL != "") {
		errs = append(errs, errors.New("--gateway: an agent behind the gateway holds no payload keys and no registry credentials (the gateway encrypts and serves content); drop --payload-keys and --content-registry"))
	}
	return labels, errors.Join(errs...)
}

// restConfig is the agent's connection to its cluster.
func (o *agentOptions) restConfig() (*rest.Config, error) {
	if o.Kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (run the agent in its cluster, or pass --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: o.KubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	return cfg, nil
}

// token returns the registration token from the flag, the environment or
// the file; "" when none was given.
func (o *agentOptions) token() (string, error) {
	if o.Token != "" || o.TokenFile == "" {
		return strings.TrimSpace(o.Token), nil
	}
	data, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--registration-token-file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

func runAgent(ctx context.Context, o agentOptions) error {
	labels, err := o.validate()
	if err != nil {
		return err
	}
	logger, err := o.Log.New()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("cluster", o.Cluster))
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	token, err := o.token()
	if err != nil {
		return err
	}
	p := &probe{}
	p.setReady(false, "starting")
	if err := serveHTTP(ctx, o.HTTPListen, p, o.Pprof, logger); err != nil {
		return fmt.Errorf("--http-listen: %w", err)
	}

	if err := exportSDKMetrics(o.HTTPListen, &o.Temporal); err != nil {
		return err
	}
	c, cs, closeConn, err := connectAgent(ctx, &o, cfg, token, labels, logger)
	if err != nil {
		return err
	}
	defer closeConn()
	defer c.Close()

	w, key, err := startAgentWorker(c, o, cfg, cs, logger)
	if err != nil {
		return err
	}
	defer w.Stop()
	logger.Info("Agent started", zap.String("taskQueue", protocol.ClusterQueue(o.Cluster)), zap.String("temporalAddress", o.Temporal.Address),
		zap.String("version", buildinfo.Get().Version))
	err = heartbeat(ctx, c, o.Cluster, protocol.Heartbeat{Interval: o.HeartbeatInterval, SealKey: key}, p, logger)
	logger.Info("Agent stopping")
	return err
}

// connectAgent connects the agent to Temporal, directly or through the
// gateway, registers its cluster if it is new, and opens its content
// store (backed by the registry, or by the gateway). closeConn closes
// the gateway connection.
func connectAgent(ctx context.Context, o *agentOptions, cfg *rest.Config, token string, labels map[string]string, logger *zap.Logger) (c client.Client, cs *content.Store, closeConn func(), err error) {
	if !o.Gateway {
		if cs, err = o.Registry.openContent(o.StateDir); err != nil {
			return nil, nil, nil, err
		}
		if c, err = o.Temporal.Dial(ctx, logger); err != nil {
			return nil, nil, nil, err
		}
		if err := registerAgent(ctx, c, o.Cluster, token, labels, logger); err != nil {
			c.Close()
			return nil, nil, nil, err
		}
		return c, cs, func() {}, nil
	}
	tlsCfg, err := o.Temporal.TLSConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := gateway.Dial(o.Temporal.Address, tlsCfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway %s: %w", o.Temporal.Address, err)
	}
	closeConn = func() { _ = conn.Close() }
	defer func() {
		if err != nil {
			closeConn()
		}
	}()
	store, err := credentialStoreFor(o, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	cred, err := agentCredential(ctx, o, store, conn, token, labels, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	local, err := content.New(filepath.Join(o.StateDir, "content"))
	if err != nil {
		return nil, nil, nil, err
	}
	o.Temporal.APIKey, o.Temporal.APIKeyFile, o.Temporal.Plaintext = cred, "", tlsCfg == nil
	o.Temporal.EncodeFailures = true // failure messages are payloads the gateway encrypts
	if c, err = o.Temporal.Dial(ctx, logger); err != nil {
		return nil, nil, nil, err
	}
	return c, local.WithRemote(gateway.NewRemote(conn, o.Temporal.Address, cred)), closeConn, nil
}

// agentCredential returns the cluster's gateway credential: given
// (--api-key, --api-key-file), kept from an earlier registration, or
// issued now for the registration token and kept.
func agentCredential(ctx context.Context, o *agentOptions, store credentialStore, conn *grpc.ClientConn, token string, labels map[string]string, logger *zap.Logger) (string, error) {
	if o.Temporal.APIKey != "" {
		return o.Temporal.APIKey, nil
	}
	if o.Temporal.APIKeyFile != "" {
		b, err := os.ReadFile(o.Temporal.APIKeyFile)
		if err != nil {
			return "", fmt.Errorf("--api-key-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if cred, err := store.load(ctx); err != nil || cred != "" {
		return cred, err
	}
	if token == "" {
		return "", fmt.Errorf("cluster %s has no credential in %s: register it with a token from `flotilla cluster token create` ($FLOTILLA_REGISTRATION_TOKEN or --registration-token-file)", o.Cluster, store)
	}
	id, _, err := cluster.ParseToken(token)
	if err != nil {
		return "", err
	}
	logger.Info("Registering cluster through the gateway", zap.String("token", id))
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cred, err := gateway.Register(rctx, conn, gateway.Registration{Cluster: o.Cluster, Token: token, Labels: labels})
	if err != nil {
		return "", err
	}
	if err := store.save(ctx, cred); err != nil {
		return "", err
	}
	logger.Info("Registered cluster; its credential is kept for restarts", zap.String("in", store.String()))
	return cred, nil
}

// startAgentWorker starts the worker of o.Cluster's task queue: the
// cluster activities, for that cluster only, through cfg.
// Its own sealing key opens the Secrets bundles copy (downstreamResources);
// the public key is returned for the heartbeats to publish.
func startAgentWorker(c client.Client, o agentOptions, cfg *rest.Config, cs *content.Store, logger *zap.Logger) (worker.Worker, *seal.PublicKey, error) {
	key, err := openAgentKey(o.StateDir, logger)
	if err != nil {
		return nil, nil, err
	}
	queue := protocol.ClusterQueue(o.Cluster)
	w := worker.New(c, queue, worker.Options{MaxConcurrentActivityExecutionSize: o.MaxConcurrentActivities,
		DisableWorkflowWorker: true})
	w.RegisterActivity(&activities.ClusterActivities{
		Clusters: cluster.NewConnections(cluster.ConnectionsOptions{
			Config: func(string) (*rest.Config, error) { return cfg, nil },
			Only:   o.Cluster,
		}),
		Deployer:   deployer.New(deployer.Options{Logger: logger.Named("helm"), ProtectedNamespaces: ownNamespace()}),
		Content:    cs,
		Logger:     logger,
		Signal:     signaller(c),
		Downstream: activities.AgentDownstream(c, o.Cluster, key),
	})
	if err := w.Start(); err != nil {
		return nil, nil, fmt.Errorf("start agent on task queue %s: %w", queue, err)
	}
	pub := key.Newest()
	return w, &pub, nil
}

// heartbeat signals the cluster's workflow every interval until ctx ends.
// A cluster that no longer exists (removed) ends the agent with an error:
// it must not keep taking work meant for a cluster re-added under its name.
func heartbeat(ctx context.Context, c client.Client, name string, hb protocol.Heartbeat, p *probe, logger *zap.Logger) error {
	hb.Version = buildinfo.Get().Version
	interval := hb.Interval
	failing := false
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.SignalWorkflow(sctx, protocol.ClusterID(name), "", protocol.SignalHeartbeat, hb)
		cancel()
		var nf *serviceerror.NotFound
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &nf):
			return fmt.Errorf("cluster %s is no longer registered (removed?); stopping so the agent takes no work meant for another cluster", name)
		case serviceerror.ToStatus(err).Code() == codes.Unauthenticated:
			return fmt.Errorf("cluster %s: the gateway refused the agent's credential (the cluster was removed or registered again?); stopping: %w", name, err)
		case err != nil:
			p.setReady(false, "heartbeat failing")
			if !failing {
				logger.Warn("Heartbeat failed; retrying", zap.Error(err))
			}
			failing = true
		default:
			if failing {
				logger.Info("Heartbeat recovered")
			}
			failing = false
			p.setReady(true, "")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// registerAgent makes sure the cluster is registered in pull mode: an
// existing registration needs no token (an agent restarts without one);
// a new cluster registers with its single-use token.
func registerAgent(ctx context.Context, c client.Client, name, token string, labels map[string]string, logger *zap.Logger) error {
	var rec protocol.ClusterRecord
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := queryStatus(qctx, c, protocol.ClusterID(name), &rec)
	cancel()
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) && ctx.Err() == nil {
		// The query needs the controller's worker; while it is down (an
		// upgrade), a running ClusterWorkflow is registration enough.
		d, derr := c.DescribeWorkflowExecution(ctx, protocol.ClusterID(name), "")
		if derr == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			logger.Warn("Could not read the cluster's record (is the controller running?); starting as registered", zap.Error(err))
			return nil
		}
	}
	switch {
	case err == nil && !rec.Removed && rec.PullMode():
		logger.Info("Cluster already registered", zap.Bool("managed", rec.Agent != nil && rec.Agent.Managed))
		return nil
	case err == nil && !rec.Removed:
		return fmt.Errorf("cluster %s is registered in push mode (the controller deploys with its kubeconfig); an agent cannot serve it: re-add it with `flotilla cluster add --install-agent`, or remove it first", name)
	case err != nil && !errors.As(err, &nf):
		return fmt.Errorf("look up cluster %s: %w", name, err)
	}
	return registerWithToken(ctx, c, name, token, labels, logger)
}

// registerWithToken registers cluster name in pull mode with its
// single-use registration token (the gateway registers agents with it).
func registerWithToken(ctx context.Context, c client.Client, name, token string, labels map[string]string, logger *zap.Logger) error {
	if token == "" {
		return fmt.Errorf("cluster %s is not registered: create a token with `flotilla cluster token create` and pass it in $FLOTILLA_REGISTRATION_TOKEN or --registration-token-file", name)
	}
	id, proof, err := cluster.ParseToken(token)
	if err != nil {
		return err
	}
	logger.Info("Registering cluster", zap.String("token", id))
	var rec protocol.ClusterRecord
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: protocol.ClusterTokenID(id), UpdateName: protocol.UpdateRegister,
		Args:         []any{protocol.Register{Cluster: name, Proof: proof, Labels: labels}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &rec)
	}
	if err != nil {
		err = tokenError(ctx, c, id, name, err)
		if errors.Is(err, errRegisteredByUs) {
			logger.Info("Cluster registered with this token before a restart", zap.String("token", id))
			return nil
		}
		return fmt.Errorf("register cluster %s: %w", name, err)
	}
	logger.Info("Registered cluster", zap.String("token", id), zap.String("labels", fmt.Sprint(labels)))
	return nil
}

// errRegisteredByUs: the token was used to register this very cluster.
var errRegisteredByUs = errors.New("registered by this agent")

// tokenError explains a failed registration: an unknown token, or one
// that was used, revoked or expired (its workflow has ended).
func tokenError(ctx context.Context, c client.Client, id, cluster string, err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return errors.New(ae.Message())
	}
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		return err
	}
	var st protocol.TokenStatus
	if qerr := queryStatus(ctx, c, protocol.ClusterTokenID(id), &st); qerr != nil {
		return fmt.Errorf("unknown registration token %s", id)
	}
	switch {
	case st.UsedBy == cluster:
		return errRegisteredByUs // an earlier run of this agent registered, then died
	case st.UsedBy != "":
		return fmt.Errorf("registration token %s was already used by cluster %s; tokens are single-use", id, st.UsedBy)
	case st.Revoked:
		return fmt.Errorf("registration token %s was revoked", id)
	case st.Expired:
		return fmt.Errorf("registration token %s expired at %s", id, st.ExpiresAt.UTC().Format(time.RFC3339))
	default:
		// Controllers before tokens outlived a refusal ended the token
		// when its first registration began.
		msg := fmt.Sprintf("registration token %s can no longer be used: its workflow ended after a refused registration", id)
		if st.Refused != "" {
			msg += " (" + st.Refused + ")"
		}
		return errors.New(msg + "; create another with `flotilla cluster token create`")
	}
}

func queryStatus(ctx context.Context, c client.Client, id string, out any) error {
	v, err := c.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	if err != nil {
		return err
	}
	return v.Get(out)
}

// serviceAccountNamespace is where a pod finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace this process runs in as a pod (none
// outside one): deleteNamespace never deletes it.
func ownNamespace() []string {
	b, err := os.ReadFile(serviceAccountNamespace)
	if ns := strings.TrimSpace(string(b)); err == nil && ns != "" {
		return []string{ns}
	}
	return nil
}
