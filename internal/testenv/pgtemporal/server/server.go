package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/server/api/adminservice/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/devserver/serverconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// visibilityStore names the visibility data store in the configuration.
const visibilityStore = "visibility"

// startServer starts the four services on the prepared databases. It
// returns once Start has returned; the services are still joining the
// membership ring then (see waitServing).
func startServer(o options, logger *zap.Logger) (temporal.Server, error) {
	srv, err := temporal.NewServer(
		temporal.WithConfig(serverConfig(o)),
		temporal.ForServices(serviceNames),
		temporal.WithLogger(log.NewZapLogger(logger.Named("temporal"))),
		temporal.WithDynamicConfigClient(serverconfig.Dynamic()),
	)
	if err != nil {
		return nil, fmt.Errorf("create Temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start Temporal server on %s: %w", o.frontend, err)
	}
	return srv, nil
}

// serverConfig is a single-cluster server with PostgreSQL persistence and
// visibility, every service bound to the frontend's host.
func serverConfig(o options) *config.Config {
	services := map[string]config.Service{}
	for _, name := range serviceNames {
		p := o.ports[name]
		services[name] = config.Service{RPC: config.RPC{
			GRPCPort:       p.grpc,
			MembershipPort: p.membership,
			BindOnIP:       o.host(),
		}}
	}
	return serverconfig.Single(o.frontend, services, config.Persistence{
		DefaultStore:     postgresql.PluginName,
		VisibilityStore:  visibilityStore,
		NumHistoryShards: o.shards,
		DataStores: map[string]config.DataStore{
			postgresql.PluginName: {SQL: sqlConfig(o, o.database)},
			visibilityStore:       {SQL: sqlConfig(o, o.visibilityDB)},
		},
	})
}

// frontendHealthService is the name under which the frontend reports its
// health through the standard gRPC health service.
const frontendHealthService = "temporal.api.workflowservice.v1.WorkflowService"

// waitServing waits until the frontend sees every service in the
// membership ring and reports itself healthy. Each service joins from a
// goroutine that outlives temporal.Server.Start, and stopping the server
// before that finishes panics inside it; a client that calls before the
// frontend is healthy gets Unavailable (and the server logs an error).
func waitServing(ctx context.Context, frontend string) error {
	conn, err := grpc.NewClient(frontend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to Temporal frontend at %s: %w", frontend, err)
	}
	defer func() { _ = conn.Close() }() // local connection; nothing to flush
	admin := adminservice.NewAdminServiceClient(conn)
	health := healthpb.NewHealthClient(conn)

	var missing []string
	for {
		missing, err = missingServices(ctx, admin)
		if err == nil && len(missing) == 0 {
			var resp *healthpb.HealthCheckResponse
			resp, err = health.Check(ctx, &healthpb.HealthCheckRequest{Service: frontendHealthService})
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("temporal frontend at %s not serving (services not in the membership ring: %v): %w", frontend, missing, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// missingServices returns the services the frontend does not see in the
// membership ring.
func missingServices(ctx context.Context, admin adminservice.AdminServiceClient) ([]string, error) {
	resp, err := admin.DescribeCluster(ctx, &adminservice.DescribeClusterRequest{})
	if err != nil {
		return serviceNames, fmt.Errorf("describe cluster: %w", err)
	}
	joined := map[string]bool{}
	for _, ring := range resp.GetMembershipInfo().GetRings() {
		joined[ring.GetRole()] = ring.GetMemberCount() > 0
	}
	var missing []string
	for _, role := range serviceNames {
		if !joined[role] {
			missing = append(missing, role)
		}
	}
	return missing, nil
}
