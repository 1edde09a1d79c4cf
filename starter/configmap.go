package main

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// applyConfigMap stores a ConfigMap in its workflow (in the clear: it is
// not secret), where bundles that name it in downstreamResources copy it
// from.
func applyConfigMap(ctx context.Context, c client.Client, queue string, cm api.ConfigMap) (string, error) {
	ns, name := cm.Metadata.Namespace, cm.Metadata.Name
	var out protocol.ConfigMapRecord
	err := temporalx.UpdateWithStart(ctx, c, queue, protocol.ConfigMapID(ns, name), protocol.UpdateApply,
		protocol.ConfigMapRecord{Namespace: ns, Name: name, Data: cm.Data, BinaryData: cm.BinaryData}, &out,
		protocol.ConfigMapWorkflow, protocol.ConfigMapStart{Record: protocol.ConfigMapRecord{Namespace: ns, Name: name}})
	return verb(out.Generation == 1, true), err
}
