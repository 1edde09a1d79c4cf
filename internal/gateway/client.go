package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/flotilla-gitops/flotilla/internal/content"
)

// Dial connects an agent to a gateway (TLS when tlsCfg is set). The
// connection carries no credential; calls add it (Remote, Register needs
// none).
func Dial(addr string, tlsCfg *tls.Config) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	return grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)))
}

// Register registers r's cluster through the gateway and returns its
// agent's credential. A refusal's message is the controller's.
func Register(ctx context.Context, conn *grpc.ClientConn, r Registration) (string, error) {
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, methodRegister, wrapperspb.String(marshalRegistration(r)), out); err != nil {
		if st, ok := status.FromError(err); ok {
			return "", fmt.Errorf("register cluster %s: %s", r.Cluster, st.Message())
		}
		return "", fmt.Errorf("register cluster %s: %w", r.Cluster, err)
	}
	return out.GetValue(), nil
}

// Remote is an agent's content store remote: the gateway, which gives the
// cluster only the content its tasks named.
type Remote struct {
	conn       *grpc.ClientConn
	credential string
	addr       string
}

var _ content.Remote = (*Remote)(nil)

// NewRemote returns the content remote of the agent holding credential.
func NewRemote(conn *grpc.ClientConn, addr, credential string) *Remote {
	return &Remote{conn: conn, credential: credential, addr: addr}
}

// String names the gateway (never the credential).
func (r *Remote) String() string { return "gateway " + r.addr }

// Push is refused: agents never write content.
func (r *Remote) Push(context.Context, content.Kind, string, []byte) error {
	return errors.New("agents do not push content")
}

// Pull fetches an item; the gateway's refusal and miss keep their class
// (content.ErrNotFound for a miss).
func (r *Remote) Pull(ctx context.Context, kind content.Kind, id string) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	err := r.conn.Invoke(ctx, methodFetch, wrapperspb.String(string(kind)+"/"+id), out, grpc.PerRPCCredentials(bearer(r.credential)))
	if err == nil {
		return out.GetValue(), nil
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound:
		return nil, fmt.Errorf("%s %s at %s: %w", kind, id, r, content.ErrNotFound)
	case codes.DataLoss:
		return nil, fmt.Errorf("%s %s at %s: %w", kind, id, r, content.ErrCorrupt)
	}
	// The status error is wrapped: callers read its code (status.FromError).
	return nil, fmt.Errorf("get %s %s from %s: %w", kind, id, r, err)
}

// bearer is a per-call credential.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: a gateway on a private network may
// run without TLS (the controller warns).
func (bearer) RequireTransportSecurity() bool { return false }

func marshalRegistration(r Registration) string {
	b, _ := json.Marshal(r) // plain data
	return string(b)
}
