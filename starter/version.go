package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/flotilla-gitops/flotilla/internal/buildinfo"
	"github.com/flotilla-gitops/flotilla/internal/output"
)

// versionInfo is what `flotilla version` prints.
type versionInfo struct {
	Client buildinfo.Info `json:"client"`
	Server *serverInfo    `json:"server,omitempty"`
}

type serverInfo struct {
	Address         string `json:"address"`
	Namespace       string `json:"namespace"`
	TemporalVersion string `json:"temporalVersion,omitempty"`
	Error           string `json:"error,omitempty"`
}

func newVersionCommand(g *globals) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the CLI version and the version of the Temporal server it reaches",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := g.format()
			if err != nil {
				return err
			}
			info := versionInfo{Client: buildinfo.Get()}
			if !clientOnly {
				info.Server = probeServer(cmd.Context(), g)
			}
			if err := output.Print(cmd.OutOrStdout(), f, info, versionRows(info)); err != nil {
				return err
			}
			if info.Server != nil && info.Server.Error != "" {
				return errServerUnreachable
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the CLI version; do not contact Temporal")
	return cmd
}

// errServerUnreachable makes `flotilla version` exit non-zero when the server
// could not be reached; the details are in the printed output above it.
var errServerUnreachable = errors.New("temporal server unreachable")

func probeServer(ctx context.Context, g *globals) *serverInfo {
	si := &serverInfo{Address: g.Temporal.Address, Namespace: g.Temporal.Namespace}
	logger, err := g.Log.New()
	if err != nil {
		si.Error = err.Error()
		return si
	}
	c, err := g.Temporal.Dial(ctx, logger)
	if err != nil {
		si.Error = err.Error()
		return si
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	if err != nil {
		si.Error = err.Error()
		return si
	}
	si.TemporalVersion = resp.GetServerVersion()
	return si
}

func versionRows(v versionInfo) output.Rows {
	rows := output.Rows{Header: []string{"COMPONENT", "VERSION", "DETAIL"}}
	rows.Rows = append(rows.Rows, []string{"flotilla", v.Client.Version, v.Client.GoVersion})
	if s := v.Server; s != nil {
		version, detail := s.TemporalVersion, s.Address+" ("+s.Namespace+")"
		if s.Error != "" {
			version, detail = "unreachable", s.Error
		}
		rows.Rows = append(rows.Rows, []string{"temporal server", version, detail})
	}
	return rows
}
