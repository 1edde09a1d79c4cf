package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func newClusterCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Register, label and remove clusters (push mode: the worker deploys with their kubeconfig)",
	}
	cmd.AddCommand(newClusterAddCommand(g), newClusterListCommand(g), newClusterLabelCommand(g), newClusterRemoveCommand(g),
		newClusterTokenCommand(g))
	return cmd
}

// clusterAddLong is the help of `flotilla cluster add`.
const clusterAddLong = `Add registers a cluster. Its kubeconfig (reduced to one context) is sealed on this
machine to the controllers' newest public key and stored in the cluster's workflow as
ciphertext: any controller replica can open it, nothing else can, and nothing is written
on this host. Adding an existing cluster replaces its
kubeconfig, and its labels when --label is given.

The context's cluster and user must carry their credentials as data: token,
client-certificate-data and client-key-data, certificate-authority-data. A kubeconfig
with exec or auth-provider plugins, tokenFile, client-certificate, client-key or
certificate-authority file paths, or proxy-url is refused, naming each field and what to
embed instead (` + "`kubectl config view --minify --flatten`" + ` embeds certificate files);
a controller never runs, reads or uses them.

With --install-agent the cluster runs in pull mode: the controller installs the agent
(a Deployment in flotilla-system, from the flotilla-agent chart) through the kubeconfig
and upgrades it only when the agent's effective configuration changes; the agent then
serves the cluster's task queue. --agent-* flags set this cluster's own agent settings;
anything unset comes from the controller's --agent-defaults.`

func newClusterAddCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext string
	var labels []string
	var agent agentFlags
	cmd := &cobra.Command{
		Use:   "add NAME --kubeconfig FILE [--context C] [--label k=v]...",
		Short: "Register a cluster; its kubeconfig is sealed to the controllers' key",
		Long:  clusterAddLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			set, _, err := parseLabels(labels, false)
			if err != nil {
				return err
			}
			if errs := api.ValidateClusterMeta(api.ObjectMeta{Name: name, Labels: set}); len(errs) > 0 {
				return &api.ValidationError{Kind: api.KindCluster, Name: name, Errs: errs}
			}
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			agentApply, err := agent.apply()
			if err != nil {
				return err
			}
			data, hash, err := cluster.ReadKubeconfig(name, kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				sealed, err := g.sealData(ctx, c, data)
				if err != nil {
					return fmt.Errorf("register cluster %s: %w", name, err)
				}
				rec, err := applyCluster(ctx, c, g.TaskQueue, name, protocol.ClusterApply{Labels: set, SetLabels: len(labels) > 0,
					KubeconfigHash: hash, Context: kubeContext, Kubeconfig: &sealed, Agent: agentApply})
				if err != nil {
					return fmt.Errorf("register cluster %s: %w", name, unwrapUpdate(err))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cluster/%s %s\n", name, verb(rec.Generation == 1, true))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster (required)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "context to use (default: the kubeconfig's current context)")
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "label k=v; repeatable")
	agent.bindFlags(cmd)
	return cmd
}

func newClusterLabelCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "label NAME k=v|k- ...",
		Short: "Set (k=v) or remove (k-) cluster labels; every GitRepo re-evaluates its targets",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			set, remove, err := parseLabels(args[1:], true)
			if err != nil {
				return err
			}
			if errs := api.ValidateLabels(set, field.NewPath("metadata", "labels")); len(errs) > 0 {
				return &api.ValidationError{Kind: api.KindCluster, Name: name, Errs: errs}
			}
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: protocol.ClusterID(name),
					UpdateName: protocol.UpdateLabel, Args: []any{protocol.ClusterLabel{Set: set, Remove: remove}},
					WaitForStage: client.WorkflowUpdateStageCompleted})
				if err != nil {
					return notFound(err, "cluster "+name)
				}
				var rec protocol.ClusterRecord
				if err := h.Get(ctx, &rec); err != nil {
					return unwrapUpdate(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cluster/%s labeled: %s\n", name, formatLabels(rec.Labels))
				return nil
			})
		},
	}
}

func newClusterRemoveCommand(g *globals) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "remove NAME [--wait=false] [--timeout D]",
		Short: "Unregister a cluster and forget its sealed kubeconfig (its releases are left in place)",
		Long: `Remove unregisters a cluster. Its workflow tells every GitRepo, which stops targeting it:
a rollout that waits for the cluster (a deploy queued for an agent that is offline) cancels
that work instead of waiting for the pickup timeout. The releases on the cluster are left
in place. By default the command waits until the cluster's workflow has ended.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			id := protocol.ClusterID(name)
			return endEntity(cmd, g, ending{id: id, title: "cluster " + name, ref: "cluster/" + name, done: "removed", requested: "removal requested"},
				wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the cluster's workflow has ended")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up waiting after this long")
	return cmd
}

func newClusterListCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List registered clusters",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return listClusters(cmd, g) },
	}
}

// clusterView is one row of `flotilla cluster list`.
type clusterView struct {
	protocol.ClusterRecord `json:",inline"`
}

func listClusters(cmd *cobra.Command, g *globals) error {
	f, _ := g.format() // validated in PersistentPreRunE
	return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
		var views []clusterView
		err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfType(protocol.ClusterWorkflow), func(id string) error {
			var rec protocol.ClusterRecord
			if err := query(ctx, c, id, id, &rec); err != nil || rec.Removed {
				return err
			}
			views = append(views, clusterView{ClusterRecord: rec})
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
		rows := output.Rows{Header: []string{"NAME", "MODE", "STATE", "LAST SEEN", "LABELS", "PAUSED", "KUBECONFIG"}}
		for _, v := range views {
			kc := "-"
			if v.KubeconfigHash != "" {
				kc = "sealed"
			}
			mode, state, seen := clusterMode(v.ClusterRecord, time.Now())
			rows.Rows = append(rows.Rows, []string{v.Name, mode, state, seen, formatLabels(v.Labels), fmt.Sprint(v.Paused), kc})
		}
		return output.Print(cmd.OutOrStdout(), f, views, rows)
	})
}

// parseLabels parses k=v (and, when allowRemove, k-) arguments.
func parseLabels(args []string, allowRemove bool) (map[string]string, []string, error) {
	set := map[string]string{}
	var remove []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			set[k] = v
			continue
		}
		if k, ok := strings.CutSuffix(a, "-"); ok && allowRemove {
			remove = append(remove, k)
			continue
		}
		return nil, nil, fmt.Errorf("label %q: want key=value%s", a, map[bool]string{true: " or key-"}[allowRemove])
	}
	return set, remove, nil
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// clusterMode describes how a cluster is served and its contact state.
func clusterMode(r protocol.ClusterRecord, now time.Time) (mode, state, lastSeen string) {
	mode, state, lastSeen = agentMode(r, now)
	if u := r.Unreachable; u != nil && (r.Agent == nil || !r.Agent.Offline) {
		// The drift watch cannot reach the API server (`-o json` has the
		// whole reason).
		state = "Offline (unreachable: " + shorten(u.Reason, 80) + ")" + agentNotes(r.Agent)
		if !u.LastContact.IsZero() {
			lastSeen = ago(now, u.LastContact)
		}
	}
	return mode, state, lastSeen
}

// agentNotes are what a table row adds about the managed agent.
func agentNotes(a *protocol.AgentRecord) string {
	if a == nil {
		return ""
	}
	notes := ""
	if a.Error != "" {
		notes += " (install failed: " + a.Error + ")"
	}
	if a.UpgradeWaits != "" {
		notes += " (" + a.UpgradeWaits + ")"
	}
	return notes
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ago says how long ago t was.
func ago(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() + " ago" }

// agentMode describes how a cluster is served and its agent's state.
func agentMode(r protocol.ClusterRecord, now time.Time) (mode, state, lastSeen string) {
	if !r.PullMode() {
		return "push", "Active", "-"
	}
	mode, state, lastSeen = "agent", "Registered", "never"
	a := r.Agent
	if a == nil {
		return mode, state, lastSeen
	}
	if a.Managed {
		mode = "agent (managed)"
	}
	if a.LastSeen != nil {
		state = "Online"
		lastSeen = ago(now, *a.LastSeen)
	}
	if a.Offline {
		state = "Offline"
	}
	return mode, state + agentNotes(a), lastSeen
}
