// Package serverconfig builds the configuration of a single-cluster
// Temporal server, the one shape both Flotilla's embedded dev server
// (package devserver, SQLite) and the tests' server on PostgreSQL
// (internal/testenv/pgtemporal) run: every service bound to the frontend's
// host, archival off, and the dynamic config `temporal server start-dev`
// sets. Only the persistence differs, and the caller gives it.
//
// It imports the server's configuration packages but not the UI, so the
// PostgreSQL test server links no more than it needs.
package serverconfig

import (
	"net"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
)

// ClusterName names the single cluster. It is stored in the database on
// first start and must not change afterwards.
const ClusterName = "active"

// Single is the configuration of a one-cluster server whose frontend
// listens on frontend (host:port), running services on persistence.
func Single(frontend string, services map[string]config.Service, persistence config.Persistence) *config.Config {
	host, _, _ := net.SplitHostPort(frontend)
	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host},
		},
		Persistence: persistence,
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        ClusterName,
			CurrentClusterName:       ClusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				ClusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		PublicClient: config.PublicClient{HostPort: frontend},
	}
}

// Dynamic mirrors what `temporal server start-dev` sets: search attributes
// visible at once, and persistence rate limits high enough that the
// database, not a limiter, is the bound. On one node the matching
// service's forwarding between a task queue's partitions (10 tasks a
// second, one at a time, by default) is no protection, only a queue: a
// rollout's thousand deploys waited seconds in it for a poller.
func Dynamic() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		dynamicconfig.FrontendPersistenceMaxQPS.Key():               50000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():                50000,
		dynamicconfig.MatchingPersistenceMaxQPS.Key():               50000,
		dynamicconfig.WorkerPersistenceMaxQPS.Key():                 50000,
		dynamicconfig.MatchingForwarderMaxRatePerSecond.Key():       1000,
		dynamicconfig.MatchingForwarderMaxOutstandingTasks.Key():    16,
		dynamicconfig.MatchingForwarderMaxOutstandingPolls.Key():    16,
	}
}
