package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/envflag"
	"github.com/flotilla-gitops/flotilla/internal/logging"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

const envPrefix = "FLOTILLA"

// defaultStateDir matches the worker's --state-dir default.
const defaultStateDir = ".flotilla"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "flotilla: "+err.Error())
		os.Exit(1)
	}
}

// globals are the flags every command shares.
type globals struct {
	Temporal  temporalx.ClientOptions
	Output    string
	Log       logging.Options
	Namespace string
	StateDir  string
	TaskQueue string
	// Seal decides which published sealing key the CLI trusts.
	Seal sealTrust
}

func (g *globals) format() (output.Format, error) { return output.Parse(g.Output) }

func newRootCommand() *cobra.Command {
	g := &globals{Temporal: temporalx.ClientOptions{Address: temporalx.DefaultAddress}}
	cmd := &cobra.Command{
		Use:           "flotilla",
		Short:         "Flotilla rolls Git changes out to fleets of Kubernetes clusters as durable Temporal workflows",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := envflag.Apply(cmd.Flags(), envPrefix); err != nil {
				return err
			}
			_, err := g.format()
			return err
		},
	}
	fs := cmd.PersistentFlags()
	g.Temporal.BindFlags(fs)
	fs.StringVarP(&g.Output, "output", "o", string(output.Table), "output format: table, yaml or json")
	fs.StringVar(&g.Log.Level, "log-level", "warn", "log level of the CLI's own diagnostics")
	fs.StringVarP(&g.Namespace, "gitrepo-namespace", "n", api.DefaultNamespace, "namespace of the GitRepo (status, sync, pause, resume, delete)")
	fs.StringVar(&g.StateDir, "state-dir", defaultStateDir, "unused: kubeconfigs and Secrets are sealed into Temporal")
	_ = fs.MarkDeprecated("state-dir", "kubeconfigs and Secrets are now sealed and stored in Temporal; the CLI keeps nothing on this host") // the flag exists
	fs.StringVar(&g.TaskQueue, "task-queue", protocol.DefaultTaskQueue, "the controller worker's task queue")
	g.Seal.bindFlags(fs)
	g.Log.Format = "console"
	envflag.Annotate(fs, envPrefix)
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return output.Formats(), cobra.ShellCompDirectiveNoFileComp
	}) // only fails for an unknown flag name

	cmd.AddCommand(newVersionCommand(g), newApplyCommand(g), newClusterCommand(g), newGetCommand(g), newStatusCommand(g), newRenderCommand(g), newApproveCommand(g),
		newSignalCommand(g, "sync", protocol.SignalSync, "Check the GitRepo's remote now and roll out, even if nothing changed", false),
		newSignalCommand(g, "pause", protocol.SignalPause, "Stop rolling out the GitRepo's changes (polling continues)", false),
		newSignalCommand(g, "resume", protocol.SignalResume, "Roll out the GitRepo's changes again", false),
		newSignalCommand(g, "delete", protocol.SignalDelete, "Delete the GitRepo and uninstall its releases (unless keepResources)", true))
	cmd.AddCommand(newDiffCommand(g), newSecretsCommand(g), newConfigMapsCommand(g))
	cmd.AddCommand(newPlanCommand(g))
	cmd.AddCommand(newHistoryCommand(g), newRollbackCommand(g))
	return cmd
}
