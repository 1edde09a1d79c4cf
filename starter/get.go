package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func newGetCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:       "get gitrepos|helmops|clusters|clustergroups|notifications",
		Short:     "List GitRepos, HelmOps, clusters, cluster groups or Notifications",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"gitrepos", "helmops", "clusters", "clustergroups", "notifications"},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "gitrepos", "gitrepo", "gitrepos.fleet.cattle.io":
				return listGitRepos(cmd, g, protocol.GitRepoWorkflow, gitRepoRows)
			case "helmops", "helmop", "helmops.fleet.cattle.io":
				return listGitRepos(cmd, g, protocol.HelmOpWorkflow, helmOpRows)
			case "clusters", "cluster":
				return listClusters(cmd, g)
			case "clustergroups", "clustergroup":
				return listGroups(cmd, g)
			case "notifications", "notification":
				return listNotifications(cmd, g)
			}
			return fmt.Errorf("unknown resource %q: want gitrepos, helmops, clusters, clustergroups or notifications", args[0])
		},
	}
	return cmd
}

// listGitRepos lists the running entity workflows of a type (GitRepos or
// HelmOps) as rows makes them.
func listGitRepos(cmd *cobra.Command, g *globals, wfType string, rows func([]status.GitRepo) output.Rows) error {
	f, _ := g.format() // validated in PersistentPreRunE
	return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
		var repos []status.GitRepo
		err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfType(wfType), func(id string) error {
			var st status.GitRepo
			if err := query(ctx, c, id, id, &st); err != nil {
				return err
			}
			repos = append(repos, st)
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(repos, func(i, j int) bool {
			return repos[i].Namespace+"/"+repos[i].Name < repos[j].Namespace+"/"+repos[j].Name
		})
		for i := range repos {
			if len(repos[i].Conditions) == 0 { // a worker that does not Finish
				repos[i].Finish()
			}
		}
		return output.Print(cmd.OutOrStdout(), f, repos, rows(repos))
	})
}

func listGroups(cmd *cobra.Command, g *globals) error {
	f, _ := g.format() // validated in PersistentPreRunE
	return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
		var groups []protocol.GroupRecord
		err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfType(protocol.ClusterGroupWorkflow), func(id string) error {
			var rec protocol.GroupRecord
			if err := query(ctx, c, id, id, &rec); err != nil || rec.Removed {
				return err
			}
			groups = append(groups, rec)
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
		rows := output.Rows{Header: []string{"NAME", "SELECTOR"}}
		for _, gr := range groups {
			sel := "<none>"
			if gr.Selector != nil {
				sel = gr.Selector.String()
			}
			rows.Rows = append(rows.Rows, []string{gr.Name, sel})
		}
		return output.Print(cmd.OutOrStdout(), f, groups, rows)
	})
}

// gitRepoRows is the table of `get gitrepos`, in the manner of Fleet's
// `kubectl get gitrepos`: the bundle deployments ready (Fleet's
// BUNDLEDEPLOYMENTS-READY column), the bundles and the clusters ready, and
// the display state. The statuses must be Finished.
func gitRepoRows(repos []status.GitRepo) output.Rows {
	rows := output.Rows{Header: []string{"NAMESPACE", "NAME", "REPO", "COMMIT", "BUNDLEDEPLOYMENTS-READY",
		"BUNDLES-READY", "CLUSTERS-READY", "STATE"}}
	for _, r := range repos {
		ready := 0
		for _, b := range r.Bundles {
			if b.State == status.Ready {
				ready++
			}
		}
		rows.Rows = append(rows.Rows, []string{r.Namespace, r.Name, r.Repo, short(r.Commit),
			r.Display.ReadyBundleDeployments, fmt.Sprintf("%d/%d", ready, len(r.Bundles)), r.Display.ReadyClusters,
			r.Display.State})
	}
	return rows
}

// helmOpRows is the table of `get helmops`: the chart, the version
// deployed, and readiness as for GitRepos.
func helmOpRows(ops []status.GitRepo) output.Rows {
	rows := output.Rows{Header: []string{"NAMESPACE", "NAME", "CHART", "VERSION", "BUNDLEDEPLOYMENTS-READY", "CLUSTERS-READY", "STATE"}}
	for _, r := range ops {
		rows.Rows = append(rows.Rows, []string{r.Namespace, r.Name, r.Repo, r.Version,
			r.Display.ReadyBundleDeployments, r.Display.ReadyClusters, r.Display.State})
	}
	return rows
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
