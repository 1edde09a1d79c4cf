package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/flotilla-gitops/flotilla/internal/content"
)

// The gateway's own service, next to WorkflowService on the same port.
// Its messages are protobuf's well-known wrappers, so it needs no
// generated code.
const (
	agentServiceName = "flotilla.gateway.v1.Agent"
	methodRegister   = "/" + agentServiceName + "/Register"
	methodFetch      = "/" + agentServiceName + "/Fetch"
)

type agentServer interface {
	registerAgent(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
	fetchContent(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.BytesValue, error)
}

type agentService struct{ s *Server }

func (a agentService) registerAgent(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	var r Registration
	if err := json.Unmarshal([]byte(in.GetValue()), &r); err != nil || r.Cluster == "" || r.Token == "" {
		return nil, status.Error(codes.InvalidArgument, "registration: want a cluster and a token")
	}
	cred, err := a.s.register(ctx, r)
	if err != nil {
		return nil, err
	}
	return wrapperspb.String(cred), nil
}

func (a agentService) fetchContent(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.BytesValue, error) {
	data, err := a.s.fetch(ctx, in.GetValue())
	if err != nil {
		return nil, err
	}
	return wrapperspb.Bytes(data), nil
}

var agentServiceDesc = grpc.ServiceDesc{
	ServiceName: agentServiceName,
	HandlerType: (*agentServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Register", Handler: unaryHandler(methodRegister, agentServer.registerAgent)},
		{MethodName: "Fetch", Handler: unaryHandler(methodFetch, agentServer.fetchContent)},
	},
	Metadata: "flotilla/gateway",
}

// unaryHandler adapts a method taking a StringValue to grpc's handler
// signature.
func unaryHandler[Resp any](full string, f func(agentServer, context.Context, *wrapperspb.StringValue) (Resp, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, req any) (any, error) {
			return f(srv.(agentServer), ctx, req.(*wrapperspb.StringValue))
		}
		if icpt == nil {
			return call(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, call)
	}
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// contentCode maps a content store error to a gRPC code the agent's
// store turns back into the same class.
func contentCode(err error) codes.Code {
	switch {
	case errors.Is(err, content.ErrNotFound):
		return codes.NotFound
	case errors.Is(err, content.ErrCorrupt):
		return codes.DataLoss
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return codes.DeadlineExceeded
	}
	return codes.Unavailable
}
