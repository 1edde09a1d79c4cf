package devserver

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/server/api/adminservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// waitMembership waits until every service has joined the membership ring.
//
// Each service announces itself from a goroutine that outlives
// temporal.Server.Start. Stopping the server while one of them is still
// joining makes the server panic (a nil ringpop label set), so Start only
// returns once the frontend sees all four roles: a Ctrl-C right after start
// then shuts down cleanly.
func waitMembership(ctx context.Context, frontend string) error {
	conn, err := grpc.NewClient(frontend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to embedded Temporal server at %s: %w", frontend, err)
	}
	defer func() { _ = conn.Close() }() // local connection; nothing to flush
	admin := adminservice.NewAdminServiceClient(conn)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	want := []string{"frontend", "history", "matching", "worker"}
	var missing []string
	for {
		resp, err := admin.DescribeCluster(ctx, &adminservice.DescribeClusterRequest{})
		if err == nil {
			joined := map[string]bool{}
			for _, ring := range resp.GetMembershipInfo().GetRings() {
				joined[ring.GetRole()] = ring.GetMemberCount() > 0
			}
			missing = missing[:0]
			for _, role := range want {
				if !joined[role] {
					missing = append(missing, role)
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("embedded Temporal services %v did not join within 30s: %w", missing, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
