package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// dial connects to Temporal with the global flags.
func (g *globals) dial(ctx context.Context) (client.Client, error) {
	logger, err := g.Log.New()
	if err != nil {
		return nil, err
	}
	return g.Temporal.Dial(ctx, logger)
}

// withClient runs fn with a connected client and a bounded context. An
// encrypted payload met without keys is reported with the flag to give.
func (g *globals) withClient(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, c client.Client) error) error {
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err = fn(ctx, c)
	if errors.Is(err, codec.ErrEncrypted) {
		return fmt.Errorf("the workflows' payloads are encrypted: give the worker's keyring with --payload-keys DIR (or FLOTILLA_PAYLOAD_KEYS): %w", err)
	}
	return err
}

// query runs the status query of workflow id into out. A missing
// workflow is reported as "<kind> <name> not found". A query the
// workflow did not answer in time (its controller is busy, as just after
// a rollout to thousands of clusters) is asked again while ctx lasts.
func query(ctx context.Context, c client.Client, id, what string, out any) error {
	for {
		v, err := c.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
		if err == nil {
			return v.Get(out)
		}
		var dl *serviceerror.DeadlineExceeded
		timedOut := errors.As(err, &dl) || errors.Is(err, context.DeadlineExceeded)
		if ctx.Err() != nil || !timedOut {
			return notFound(err, what)
		}
		select {
		case <-ctx.Done():
			return notFound(err, what)
		case <-time.After(queryRetryPause):
		}
	}
}

// queryRetryPause is the pause before a query that timed out is asked
// again.
const queryRetryPause = 500 * time.Millisecond

func notFound(err error, what string) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%s not found", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// gitRepoStatus returns the GitRepo's status, with the running rollout's
// live progress folded in.
func gitRepoStatus(ctx context.Context, c client.Client, namespace, name string) (status.GitRepo, error) {
	var st status.GitRepo
	e := parseEntity(namespace, name)
	if err := query(ctx, c, e.id(), e.title(), &st); err != nil {
		return st, err
	}
	if st.Rollout == "" {
		return st, nil
	}
	var ro status.Rollout
	if err := query(ctx, c, st.Rollout, "rollout "+st.Rollout, &ro); err != nil || len(ro.Deployments) == 0 {
		return st, nil // it may have just finished; the GitRepo's view stands
	}
	// The running rollout knows more than the GitRepo: live states, what
	// waits (approvals, limits, windows) and its progress.
	st.Deployments = ro.Deployments
	st.Waits, st.Partitions, st.Halts, st.Progress = ro.Waits, ro.Partitions, ro.Halts, ro.Progress
	st.Finish()
	return st, nil
}
