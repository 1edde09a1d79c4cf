package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// errDenied marks a request the cluster's agent may not make.
var errDenied = errors.New("not allowed for an agent")

// ownSignals are the signals an agent sends its own ClusterWorkflow.
var ownSignals = map[string]bool{protocol.SignalHeartbeat: true, protocol.SignalContact: true}

// authorize decides whether cluster's agent may make req in namespace ns,
// and rewrites the task tokens it carries back into Temporal's. Deny by
// default: a request type not listed here is refused.
func (s *Server) authorize(cluster string, req any) error {
	if n, ok := req.(interface{ GetNamespace() string }); ok && n.GetNamespace() != s.opts.Namespace {
		return fmt.Errorf("%w: namespace %q", errDenied, n.GetNamespace())
	}
	switch r := req.(type) {
	case *workflowservice.GetSystemInfoRequest, *workflowservice.DescribeNamespaceRequest,
		*workflowservice.RecordWorkerHeartbeatRequest, *workflowservice.ShutdownWorkerRequest:
		return nil
	case *workflowservice.PollActivityTaskQueueRequest:
		if q := r.GetTaskQueue().GetName(); q != protocol.ClusterQueue(cluster) {
			return fmt.Errorf("%w: polling task queue %s", errDenied, q)
		}
		return nil
	case *workflowservice.RecordActivityTaskHeartbeatRequest:
		return s.unwrapInto(cluster, &r.TaskToken)
	case *workflowservice.RespondActivityTaskCompletedRequest:
		return s.unwrapInto(cluster, &r.TaskToken)
	case *workflowservice.RespondActivityTaskFailedRequest:
		return s.unwrapInto(cluster, &r.TaskToken)
	case *workflowservice.RespondActivityTaskCanceledRequest:
		return s.unwrapInto(cluster, &r.TaskToken)
	case *workflowservice.SignalWorkflowExecutionRequest:
		return authorizeSignal(cluster, r)
	case *workflowservice.UpdateWorkflowExecutionRequest:
		name := r.GetRequest().GetInput().GetName()
		if id := r.GetWorkflowExecution().GetWorkflowId(); id != protocol.ClusterID(cluster) || name != protocol.UpdateDownstream {
			return fmt.Errorf("%w: update %q of workflow %s", errDenied, name, id)
		}
		return nil
	case *workflowservice.PollWorkflowExecutionUpdateRequest:
		if id := r.GetUpdateRef().GetWorkflowExecution().GetWorkflowId(); id != protocol.ClusterID(cluster) {
			return fmt.Errorf("%w: update result of workflow %s", errDenied, id)
		}
		return nil
	}
	return fmt.Errorf("%w: %T", errDenied, req)
}

// unwrapInto replaces the gateway's task token in *token with Temporal's.
func (s *Server) unwrapInto(cluster string, token *[]byte) error {
	t, err := unwrapToken(s.opts.Keys, cluster, *token)
	if err != nil {
		return fmt.Errorf("%w: %w", errDenied, err)
	}
	*token = t
	return nil
}

// authorizeSignal allows the heartbeat and contact signals to the
// cluster's own workflow, and live reports about the cluster itself (and
// nothing else) to GitRepos and HelmOps.
func authorizeSignal(cluster string, r *workflowservice.SignalWorkflowExecutionRequest) error {
	id, name := r.GetWorkflowExecution().GetWorkflowId(), r.GetSignalName()
	switch {
	case id == protocol.ClusterID(cluster) && ownSignals[name]:
		return nil
	case name == protocol.SignalLive && (strings.HasPrefix(id, "gitrepo/") || strings.HasPrefix(id, "helmop/")):
		return checkLive(cluster, r.GetInput())
	}
	return fmt.Errorf("%w: signal %q to workflow %s", errDenied, name, id)
}

// checkLive allows a live signal that reports on cluster alone: an agent
// watches its own cluster, so it never batches others' reports or speaks
// for the cluster's workflow (contact).
func checkLive(cluster string, in *commonpb.Payloads) error {
	ps := in.GetPayloads()
	if len(ps) != 1 {
		return fmt.Errorf("%w: live signal with %d arguments", errDenied, len(ps))
	}
	var sig struct {
		Cluster string            `json:"cluster"`
		More    []json.RawMessage `json:"more"`
		Contact json.RawMessage   `json:"contact"`
	}
	if err := decodeJSON(ps[0], &sig); err != nil {
		return fmt.Errorf("%w: live signal: %w", errDenied, err)
	}
	if sig.Cluster != cluster || len(sig.More) > 0 || len(sig.Contact) > 0 && string(sig.Contact) != "null" {
		return fmt.Errorf("%w: live signal about cluster %q", errDenied, sig.Cluster)
	}
	return nil
}

// decodeJSON reads a JSON payload, compressed or not (agents write what
// codec.NewKeylessDataConverter writes).
func decodeJSON(p *commonpb.Payload, out any) error {
	dec, err := codec.Compression.Decode([]*commonpb.Payload{p})
	if err != nil {
		return err
	}
	if enc := string(dec[0].GetMetadata()["encoding"]); enc != "json/plain" {
		return fmt.Errorf("payload encoding %q", enc)
	}
	return json.Unmarshal(dec[0].GetData(), out)
}
