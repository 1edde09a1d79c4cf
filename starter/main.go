package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/internal/envflag"
	"github.com/flotilla-gitops/flotilla/internal/logging"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

const envPrefix = "FLOTILLA"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla: "+err.Error())
		os.Exit(1)
	}
}

// globals are the flags every command shares.
type globals struct {
	Temporal temporalx.ClientOptions
	Output   string
	Log      logging.Options
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
	g.Log.Format = "console"
	envflag.Annotate(fs, envPrefix)
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return output.Formats(), cobra.ShellCompDirectiveNoFileComp
	}) // only fails for an unknown flag name

	cmd.AddCommand(newVersionCommand(g))
	return cmd
}
