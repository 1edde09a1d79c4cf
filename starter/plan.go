package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/dirarchive"
	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// planFlags are `flotilla plan`'s own flags.
type planFlags struct {
	commit, branch, path string
	clusters             []string
	timeout              time.Duration
}

func newPlanCommand(g *globals) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan NAME",
		Short: "Show what rolling a change of a GitRepo out would do on each cluster, before it happens",
		Long: `Plan renders a change of GitRepo NAME for every cluster it targets and compares it with
what each cluster runs: a server-side dry run on each reachable cluster (so defaults,
admission and immutable fields show as the API server would apply them), and the offline
render, compared with what the GitRepo last deployed there, where a cluster cannot be
reached (marked offline, with the reason). Per cluster it lists the releases installed,
upgraded, uninstalled or unchanged and the diff of each changed object; Secret values never
appear.

The change is the head of the GitRepo's branch now, or --commit SHA (a full hash, or an
abbreviation of the GitRepo's current or latest commit), or the head of --branch B, or the
local directory --path DIR rendered in place of the repository's tree (at most 1 MiB
gzipped, 20 MiB unpacked; no symlinks). --cluster restricts the plan to clusters.

Nothing is applied. Exit status: 0 when nothing would change, 2 when something would
(for CI), 1 on error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := g.format() // validated in PersistentPreRunE
			req, err := f.request(g.Namespace, args[0])
			if err != nil {
				return err
			}
			var res plan.Result
			err = g.withClient(cmd.Context(), f.timeout, func(ctx context.Context, c client.Client) error {
				res, err = runPlan(ctx, c, g.TaskQueue, req)
				return err
			})
			if err != nil {
				return err
			}
			if err := printPlan(cmd.OutOrStdout(), format, res); err != nil {
				return err
			}
			if res.Changes() {
				return exitError{code: 2}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.commit, "commit", "", "plan this commit (full hash, or an abbreviation of the GitRepo's current or latest commit)")
	fs.StringVar(&f.branch, "branch", "", "plan the head of this branch of the GitRepo's repository")
	fs.StringVar(&f.path, "path", "", "plan this local directory in place of the repository's tree")
	fs.StringSliceVar(&f.clusters, "cluster", nil, "plan only these clusters (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the plan")
	cmd.MarkFlagsMutuallyExclusive("commit", "branch", "path")
	return cmd
}

// request builds the PlanWorkflow's input from the flags, packing --path.
func (f planFlags) request(namespace, name string) (plan.Request, error) {
	req := plan.Request{Namespace: namespace, Name: name, Commit: f.commit, Branch: f.branch, Clusters: f.clusters}
	if f.path == "" {
		return req, nil
	}
	abs, err := filepath.Abs(f.path)
	if err != nil {
		return plan.Request{}, fmt.Errorf("--path %s: %w", f.path, err)
	}
	if req.Archive, err = dirarchive.Pack(abs); err != nil {
		return plan.Request{}, fmt.Errorf("--path: %w", err)
	}
	req.Path = f.path
	return req, nil
}

// runPlan runs the PlanWorkflow for req on the controller's task queue
// and returns its plan. A failure is returned as the activity's own
// message ("GitRepo ns/name not found"), not Temporal's wrapping.
func runPlan(ctx context.Context, c client.Client, taskQueue string, req plan.Request) (plan.Result, error) {
	var res plan.Result
	id, err := planID(req)
	if err != nil {
		return res, err
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, plan.WorkflowName, req)
	if err != nil {
		return res, fmt.Errorf("start plan of %s/%s: %w", req.Namespace, req.Name, err)
	}
	err = run.Get(ctx, &res)
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return res, fmt.Errorf("plan of %s/%s: %s", req.Namespace, req.Name, ae.Message())
	}
	if err != nil {
		return res, fmt.Errorf("plan of %s/%s: %w", req.Namespace, req.Name, err)
	}
	return res, nil
}

// planID is "plan/<namespace>/<name>/<random>".
func planID(req plan.Request) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("plan ID: %w", err)
	}
	return plan.WorkflowIDPrefix + req.Namespace + "/" + req.Name + "/" + hex.EncodeToString(b), nil
}
