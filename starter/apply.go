package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func newApplyCommand(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update GitRepos, HelmOps, Clusters, ClusterGroups, Policies, Notifications, Secrets and ConfigMaps from YAML",
		Long: `Apply reads every document first and validates all of them; if any is invalid nothing
is applied. GitRepo, HelmOp and ClusterGroup documents may use apiVersion flotilla.dev/v1alpha1 or
Fleet's fleet.cattle.io/v1alpha1. A v1 Secret (basic-auth: username and password, or token;
or webhook keys) is sealed on this machine to the controllers' public key and stored in
Temporal as ciphertext; name it in a GitRepo's clientSecretName, helmSecretName or
webhookSecret. A Secret of any type and keys, and a v1 ConfigMap (stored in Temporal as
it is: ConfigMaps are not secret), can be copied to clusters by fleet.yaml
downstreamResources of the bundles in its namespace; changing one redeploys them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("-f is required (a file, a directory of *.yaml, or - for stdin)")
			}
			docs, err := readDocuments(cmd.InOrStdin(), files)
			if err != nil {
				return err
			}
			for _, d := range docs {
				for _, w := range d.Warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "Warning: "+w)
				}
			}
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				return applyDocuments(ctx, c, g, docs, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory (its *.yaml, *.yml, *.json) or - for stdin; repeatable")
	return cmd
}

// readDocuments decodes and validates every document of every input.
func readDocuments(stdin io.Reader, files []string) ([]api.Document, error) {
	var docs []api.Document
	for _, f := range files {
		paths, err := expand(f)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			d, err := decodeFile(stdin, p)
			if err != nil {
				return nil, err
			}
			if err := checkHelmOps(d); err != nil {
				return nil, err
			}
			docs = append(docs, d...)
		}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no documents in %s", strings.Join(files, ", "))
	}
	// Secrets and groups first, GitRepos and HelmOps last: what they reference exists.
	order := map[string]int{api.KindSecret: 0, api.KindConfigMap: 0, api.KindClusterGroup: 1, api.KindCluster: 2, api.KindGitRepo: 3, api.KindHelmOp: 3}
	sort.SliceStable(docs, func(i, j int) bool { return order[docs[i].Kind()] < order[docs[j].Kind()] })
	return docs, nil
}

// decodeFile decodes one input: a file, or stdin for "-".
func decodeFile(stdin io.Reader, path string) ([]api.Document, error) {
	if path == "-" {
		return api.Decode(stdin, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return api.Decode(f, path)
}

func expand(f string) ([]string, error) {
	if f == "-" {
		return []string{f}, nil
	}
	info, err := os.Stat(f)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{f}, nil
	}
	var out []string
	for _, pat := range []string{"*.yaml", "*.yml", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(f, pat)) // patterns are constant and valid
		out = append(out, m...)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files", f)
	}
	return out, nil
}

func applyDocuments(ctx context.Context, c client.Client, g *globals, docs []api.Document, out io.Writer) error {
	for _, d := range docs {
		verb, err := applyOne(ctx, c, g, d)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", d.Source, strings.ToLower(d.Kind()), d.Name(), unwrapUpdate(err))
		}
		fmt.Fprintf(out, "%s/%s %s\n", strings.ToLower(d.Kind()), d.Name(), verb)
	}
	return nil
}

// historyBudget is the history length at which a GitRepo or HelmOp
// started by this apply continues as new: FLOTILLA_HISTORY_BUDGET when
// set (tests and the soak benchmark lower it so runs must continue as
// new), else the workflow's default (0).
func historyBudget() int {
	n, err := strconv.Atoi(os.Getenv("FLOTILLA_HISTORY_BUDGET"))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// applier applies documents for the CLI: Secrets sealed to the published
// key this CLI trusts, nothing marked as managed.
func (g *globals) applier(c client.Client) *applier.Applier {
	return &applier.Applier{Temporal: c, TaskQueue: g.TaskQueue, Sealer: cliSealer{g}, HistoryBudget: historyBudget()}
}

// cliSealer seals to the controllers' newest published key, once its
// signature is trusted (globals.sealData).
type cliSealer struct{ g *globals }

func (s cliSealer) Seal(ctx context.Context, c client.Client, data []byte) (seal.Box, error) {
	return s.g.sealData(ctx, c, data)
}

func applyOne(ctx context.Context, c client.Client, g *globals, d api.Document) (string, error) {
	return g.applier(c).Apply(ctx, d)
}

func verb(created, changed bool) string { return applier.Verb(created, changed) }

func applyCluster(ctx context.Context, c client.Client, queue, name string, a protocol.ClusterApply) (protocol.ClusterRecord, error) {
	return temporalx.ApplyCluster(ctx, c, queue, name, a)
}

// unwrapUpdate reduces a rejected update to its message.
func unwrapUpdate(err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return errors.New(ae.Message())
	}
	return err
}
