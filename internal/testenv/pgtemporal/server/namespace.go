package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// ensureNamespace registers o.namespace if it is missing, adds any of
// Flotilla's search attributes it lacks, and returns once the frontend
// serves the namespace. "Already exists" answers count as success, so it
// runs on every start.
func ensureNamespace(ctx context.Context, o options, logger *zap.Logger) error {
	c, err := temporalx.ClientOptions{Address: o.frontend, Namespace: o.namespace}.Dial(ctx, logger.Named("client"))
	if err != nil {
		return err
	}
	defer c.Close()

	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        o.namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(o.retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", o.namespace, err)
	}
	if err := addSearchAttributes(ctx, c, o.namespace, temporalx.SearchAttributes()); err != nil {
		return err
	}
	return waitNamespace(ctx, c, o.namespace)
}

// addSearchAttributes adds the attributes of want that namespace lacks and
// fails if one exists with another type.
func addSearchAttributes(ctx context.Context, c client.Client, namespace string, want map[string]enumspb.IndexedValueType) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, t := range want {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = t
		case got != t:
			return fmt.Errorf("search attribute %s of namespace %s has type %s, want %s", name, namespace, got, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes %v to namespace %s: %w", keys(missing), namespace, err)
	}
	return nil
}

// waitNamespace waits until a visibility query on namespace succeeds: the
// frontend learns of a namespace registered a moment ago only when its
// namespace cache refreshes.
func waitNamespace(ctx context.Context, c client.Client, namespace string) error {
	for {
		_, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is not served: %w", namespace, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func keys(m map[string]enumspb.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
