package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// MaxMessageSize bounds every message through the gateway (content items
// included); Temporal's own limit on a payload is lower.
const MaxMessageSize = 64 << 20

// epochTTL is how long a cluster's registration epoch is trusted before
// it is read again: a removed cluster's agent is refused within it.
const epochTTL = 10 * time.Second

// Registration is an agent's request to register its cluster with a
// registration token (protocol.Register, with the token itself).
type Registration struct {
	Cluster string            `json:"cluster"`
	Token   string            `json:"token"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Options configure a Server.
type Options struct {
	// Namespace is the Temporal namespace agents work in; requests for
	// another are refused.
	Namespace string
	// Forward reaches Temporal with the controller's credentials and
	// payload codec (agents' payloads are encrypted on the way in and
	// decrypted on the way out).
	Forward workflowservice.WorkflowServiceClient
	// Keys make and check credentials and task tokens (the sealing keys).
	Keys MACer
	// Content returns a content item (kind "manifest" or "options").
	Content func(ctx context.Context, kind, id string) ([]byte, error)
	// Register registers a cluster with a registration token; its errors
	// are shown to the agent.
	Register func(ctx context.Context, r Registration) error
	// TLS, when set, serves TLS.
	TLS    *tls.Config
	Logger *zap.Logger
}

// Server is the agents' gateway.
type Server struct {
	opts   Options
	grpc   *grpc.Server
	grants *grants

	mu     sync.Mutex
	epochs map[string]epoch
}

type epoch struct {
	id   string // "" while the cluster has no running workflow
	read time.Time
}

// New returns a gateway; Serve serves it.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Server{opts: opts, grants: newGrants(), epochs: map[string]epoch{}}
	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.intercept),
		grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.MaxConcurrentStreams(1000),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(10 * time.Second),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(sopts...)
	workflowservice.RegisterWorkflowServiceServer(s.grpc, noStreams{proxyServer(opts.Forward)})
	s.grpc.RegisterService(&agentServiceDesc, agentService{s})
	return s
}

// proxyServer forwards every RPC to c without the agent's headers (its
// credential must not reach Temporal).
func proxyServer(c workflowservice.WorkflowServiceClient) workflowservice.WorkflowServiceServer {
	srv, err := proxy.NewWorkflowServiceProxyServer(proxy.WorkflowServiceProxyOptions{Client: c, DisableHeaderForwarding: true})
	if err != nil {
		panic(fmt.Sprintf("gateway: %v", err)) // only fails without a client
	}
	return srv
}

// noStreams is the proxy; WorkflowService has no streaming RPCs, so
// every call passes intercept.
type noStreams struct {
	workflowservice.WorkflowServiceServer
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			s.grpc.Stop()
		}
	}()
	err := s.grpc.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// intercept authenticates every call but registration and lets through
// only what the caller's cluster may do.
func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == methodRegister {
		return handler(ctx, req)
	}
	cluster, err := s.authenticate(ctx)
	if err != nil {
		s.opts.Logger.Warn("Gateway refused a call: no valid agent credential", zap.String("method", info.FullMethod), zap.Error(err),
			zap.String("peer", peerAddr(ctx)))
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	ctx = context.WithValue(ctx, clusterKey{}, cluster)
	if info.FullMethod != methodFetch {
		if err := s.authorize(cluster, req); err != nil {
			s.opts.Logger.Warn("Gateway refused an agent's call", zap.String("cluster", cluster), zap.String("method", info.FullMethod), zap.Error(err))
			return nil, status.Errorf(codes.PermissionDenied, "cluster %s: %v", cluster, err)
		}
	}
	resp, err := handler(ctx, req)
	if p, ok := resp.(*workflowservice.PollActivityTaskQueueResponse); ok && err == nil && len(p.GetTaskToken()) > 0 {
		s.grants.add(cluster, p.GetInput())
		if p.TaskToken, err = wrapToken(s.opts.Keys, cluster, p.GetTaskToken()); err != nil {
			return nil, status.Errorf(codes.Internal, "gateway: %v", err)
		}
	}
	return resp, err
}

type clusterKey struct{}

func clusterOf(ctx context.Context) string { c, _ := ctx.Value(clusterKey{}).(string); return c }

// authenticate returns the cluster whose current credential the call
// carries as a bearer token.
func (s *Server) authenticate(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	if len(auth) != 1 {
		return "", fmt.Errorf("%w: no credential", ErrCredential)
	}
	tok, ok := strings.CutPrefix(auth[0], "Bearer ")
	if !ok {
		return "", fmt.Errorf("%w: not a bearer token", ErrCredential)
	}
	c, err := parseCredential(tok)
	if err != nil {
		return "", err
	}
	e, err := s.epoch(ctx, c.cluster, false)
	if err == nil {
		err = c.verify(s.opts.Keys, e)
	}
	if errors.Is(err, ErrCredential) && s.stale(c.cluster) {
		// Registered again (or re-added) since the epoch was read.
		if e, err = s.epoch(ctx, c.cluster, true); err == nil {
			err = c.verify(s.opts.Keys, e)
		}
	}
	if err != nil {
		return "", err
	}
	return c.cluster, nil
}

// stale reports whether cluster's cached epoch is old enough to read again
// after a failed check (at most once a second per cluster).
func (s *Server) stale(cluster string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.epochs[cluster].read) > time.Second
}

// epoch returns the registration epoch of cluster: the first run ID of
// its running ClusterWorkflow chain.
func (s *Server) epoch(ctx context.Context, cluster string, fresh bool) (string, error) {
	s.mu.Lock()
	e, ok := s.epochs[cluster]
	s.mu.Unlock()
	if !ok || fresh || time.Since(e.read) > epochTTL {
		id, err := readEpoch(ctx, s.opts.Forward, s.opts.Namespace, cluster)
		if err != nil {
			return "", err
		}
		e = epoch{id: id, read: time.Now()}
		s.mu.Lock()
		s.epochs[cluster] = e
		s.mu.Unlock()
	}
	if e.id == "" {
		return "", fmt.Errorf("%w: cluster %s is not registered", ErrCredential, cluster)
	}
	return e.id, nil
}

// readEpoch reads cluster's epoch from Temporal; "" when the cluster has
// no running workflow (never registered, or removed).
func readEpoch(ctx context.Context, c workflowservice.WorkflowServiceClient, namespace, cluster string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: protocol.ClusterID(cluster)}})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read cluster %s: %w", cluster, err)
	case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "", nil
	}
	info := d.GetWorkflowExecutionInfo()
	if first := info.GetFirstRunId(); first != "" {
		return first, nil
	}
	return info.GetExecution().GetRunId(), nil
}

// Epoch is Issue's epoch for cluster, read from Temporal: what the
// controller issues a managed agent's credential for.
func Epoch(ctx context.Context, c workflowservice.WorkflowServiceClient, namespace, cluster string) (string, error) {
	id, err := readEpoch(ctx, c, namespace, cluster)
	if err == nil && id == "" {
		err = fmt.Errorf("cluster %s is not registered", cluster)
	}
	return id, err
}

// register registers a cluster with its token and returns its agent's
// credential.
func (s *Server) register(ctx context.Context, r Registration) (string, error) {
	if s.opts.Register == nil {
		return "", status.Error(codes.Unimplemented, "this gateway does not register clusters")
	}
	if err := s.opts.Register(ctx, r); err != nil {
		s.opts.Logger.Warn("Gateway refused a registration", zap.String("cluster", r.Cluster), zap.Error(err), zap.String("peer", peerAddr(ctx)))
		return "", status.Error(codes.FailedPrecondition, err.Error())
	}
	e, err := s.epoch(ctx, r.Cluster, true)
	if err != nil {
		return "", status.Error(codes.Unavailable, err.Error())
	}
	cred, err := Issue(s.opts.Keys, r.Cluster, e)
	if err != nil {
		return "", status.Errorf(codes.Internal, "issue a credential: %v", err)
	}
	s.opts.Logger.Info("Gateway registered a cluster and issued its agent's credential", zap.String("cluster", r.Cluster))
	return cred, nil
}

// fetch returns a content item the caller's tasks named.
func (s *Server) fetch(ctx context.Context, item string) ([]byte, error) {
	cluster := clusterOf(ctx)
	kind, id, ok := strings.Cut(item, "/")
	if !ok || (kind != "manifest" && kind != "options") {
		return nil, status.Errorf(codes.InvalidArgument, "content %q: want manifest/ID or options/HASH", item)
	}
	if !s.grants.allowed(cluster, item) {
		s.opts.Logger.Warn("Gateway refused an agent's content fetch: no task of the cluster names it", zap.String("cluster", cluster), zap.String("content", item))
		return nil, status.Errorf(codes.PermissionDenied, "cluster %s: content %s was not named by any task of this cluster", cluster, item)
	}
	data, err := s.opts.Content(ctx, kind, id)
	if err != nil {
		return nil, status.Errorf(contentCode(err), "content %s: %v", item, err)
	}
	return data, nil
}
