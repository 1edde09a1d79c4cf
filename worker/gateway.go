package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/gateway"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// gatewayFlags configure the agents' gateway a controller serves.
type gatewayFlags struct {
	Listen    string
	Advertise string
	TLSCert   string
	TLSKey    string
	// MaxConnections bounds the gateway's open connections (one per agent).
	MaxConnections int
}

func (g *gatewayFlags) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&g.Listen, "gateway-listen", "", `host:port of the agents' gateway: agents connect here, each with its own cluster's credential, instead of to Temporal ("" disables; the chart serves :7243)`)
	fs.StringVar(&g.Advertise, "gateway-address", "", "address managed agents dial to reach the gateway, host:port (default: --gateway-listen); set it to the controller Service's name")
	fs.StringVar(&g.TLSCert, "gateway-tls-cert", "", "PEM certificate the gateway serves TLS with (with --gateway-tls-key); without it agents' credentials cross the network in clear")
	fs.StringVar(&g.TLSKey, "gateway-tls-key", "", "PEM private key of --gateway-tls-cert")
	fs.IntVar(&g.MaxConnections, "gateway-max-connections", 10000, "most connections the gateway holds open at once (each agent keeps one); more wait unaccepted")
}

// address is what managed agents dial.
func (g gatewayFlags) address() string {
	if g.Advertise != "" {
		return g.Advertise
	}
	return g.Listen
}

func (g gatewayFlags) validate() error {
	if (g.TLSCert == "") != (g.TLSKey == "") {
		return fmt.Errorf("--gateway-tls-cert and --gateway-tls-key go together")
	}
	if g.Listen != "" && g.MaxConnections < 1 {
		return fmt.Errorf("--gateway-max-connections must be ≥ 1")
	}
	return nil
}

func (g gatewayFlags) tlsConfig() (*tls.Config, error) {
	if g.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(g.TLSCert, g.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--gateway-tls-cert: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// sealKeys makes the gateway's MACs with the controllers' sealing keys,
// which every replica holds.
type sealKeys struct{ o *seal.Opener }

func (k sealKeys) MAC(keyID string, msg []byte) ([]byte, error) { return k.o.MAC(keyID, msg) }
func (k sealKeys) NewestKeyID() string                          { return k.o.Newest().ID }

// serveGateway serves the agents' gateway on --gateway-listen until ctx
// ends. It forwards to Temporal through its own connection, which holds
// the payload keys.
func serveGateway(ctx context.Context, o options, c client.Client, st *stores, logger *zap.Logger) error {
	g := o.Gateway
	if g.Listen == "" {
		return nil
	}
	tlsCfg, err := g.tlsConfig()
	if err != nil {
		return err
	}
	fwd, err := o.Temporal.DialForwarder(ctx, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", g.Listen)
	if err != nil {
		fwd.Close()
		return fmt.Errorf("--gateway-listen: %w", err)
	}
	if g.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, g.MaxConnections)
	}
	srv := gateway.New(gateway.Options{
		Namespace: o.Temporal.Namespace,
		Forward:   fwd.WorkflowService(),
		Keys:      sealKeys{st.sealing.Opener},
		Content: func(ctx context.Context, kind, id string) ([]byte, error) {
			return st.content.Raw(ctx, content.Kind(kind), id)
		},
		Register: func(ctx context.Context, r gateway.Registration) error {
			return registerWithToken(ctx, c, r.Cluster, r.Token, r.Labels, logger)
		},
		TLS:    tlsCfg,
		Logger: logger.Named("gateway"),
	})
	if tlsCfg == nil && !loopback(ln.Addr()) {
		logger.Warn("The agents' gateway serves without TLS: agents' credentials cross the network in clear; set --gateway-tls-cert and --gateway-tls-key",
			zap.String("listen", ln.Addr().String()))
	}
	go func() {
		defer fwd.Close()
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("Agents' gateway stopped", zap.Error(err))
		}
	}()
	logger.Info("Serving the agents' gateway", zap.String("listen", ln.Addr().String()), zap.Bool("tls", tlsCfg != nil))
	return nil
}

func loopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// credentialIssuer issues managed agents' gateway credentials (what
// EnsureAgent puts in the agent's Secret): the same credential the
// gateway would issue at registration, for the cluster's current epoch.
func credentialIssuer(c client.Client, namespace string, o *seal.Opener) func(ctx context.Context, cluster string) (string, error) {
	return func(ctx context.Context, cluster string) (string, error) {
		epoch, err := gateway.Epoch(ctx, c.WorkflowService(), namespace, cluster)
		if err != nil {
			return "", err
		}
		return gateway.Issue(sealKeys{o}, cluster, epoch)
	}
}
