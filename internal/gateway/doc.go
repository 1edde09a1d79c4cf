// Package gateway is the agents' only way in: a gRPC server, served by
// every controller replica, that stands in for Temporal's frontend. Each
// agent authenticates with a credential bound to its cluster (Issue,
// Verifier); the gateway forwards to Temporal, with the controller's
// credentials and payload keys, exactly what that cluster's agent needs:
// polling its own task queue, answering and heartbeating the tasks it
// was given (task tokens are bound to the cluster, see wrapToken),
// signalling its own ClusterWorkflow and the live reports of its own
// cluster, asking for its own downstream Secrets, and fetching the
// content (rendered manifests, options) its tasks name. Everything else
// is refused with PermissionDenied and logged with the cluster's name.
//
// Agents hold neither Temporal credentials nor payload keys nor the
// content registry's: nothing found on a workload cluster reaches
// Temporal, the registry or the sealing keys.
package gateway
