package devserver

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// ensureSearchAttributes adds any of opts.SearchAttributes missing from the
// namespace. Attributes are registered when the namespace is created; this
// covers a state file created by an older version with fewer attributes.
func ensureSearchAttributes(ctx context.Context, frontend string, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  frontend,
		Namespace: opts.Namespace,
		Logger:    sdklog.NewStructuredLogger(nil),
	})
	if err != nil {
		return fmt.Errorf("connect to embedded Temporal server at %s: %w", frontend, err)
	}
	defer c.Close()

	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: opts.Namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", opts.Namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, t := range opts.SearchAttributes {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = t
		case got != t:
			return fmt.Errorf("search attribute %s in namespace %s has type %s, want %s", name, opts.Namespace, got, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        opts.Namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("add search attributes to namespace %s: %w", opts.Namespace, err)
	}
	return nil
}
