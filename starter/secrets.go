package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

func newSecretsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the sealed Secrets and the controllers' sealing keys",
		Long: `Kubeconfigs (flotilla cluster add) and Secrets (flotilla apply) are sealed on this
machine to the newest public key the controllers published, and reach the controllers
through Temporal as ciphertext: only the controllers hold the private keys (--seal-keys).

Anyone with access to the Temporal namespace can publish a key, so the CLI seals only to a
key signed by the controllers' signing key: the one it pinned the first time it sealed for
this Temporal address and namespace (it prints the fingerprint; compare it with the one a
controller logs at start), or the one given with --seal-key-fingerprint (which pins it).
Pins are kept in --known-seal-keys (default <user config dir>/flotilla/known-seal-keys).
A new sealing key of the same signer is told on stderr; a key of another signer, or an
unsigned one, is refused.`,
	}
	cmd.AddCommand(newSecretsRotateCommand(g), newSecretsPublicKeyCommand(g), newSecretsSignerCommand(g), newSecretsDeleteCommand(g))
	return cmd
}

func newSecretsRotateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate",
		Short: "Re-seal every kubeconfig and Secret to the controllers' newest key",
		Long: `Rotate asks a controller to open every sealed kubeconfig and Secret with the key it was
sealed to and seal it again to the newest key. Add the new key to every controller's
--seal-keys first and restart them; after the rotation the old key can be removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd.Context(), 30*time.Minute, func(ctx context.Context, c client.Client) error {
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: "reseal/" + time.Now().UTC().Format("20060102T150405.000Z"), TaskQueue: g.TaskQueue,
				}, protocol.ResealWorkflow)
				if err != nil {
					return err
				}
				var res protocol.ResealResult
				if err := run.Get(ctx, &res); err != nil {
					return unwrapUpdate(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "re-sealed %d kubeconfigs and %d secrets to key %s (%d already were)\n",
					res.Kubeconfigs, res.Secrets, res.KeyID, res.Unchanged)
				for _, f := range res.Failed {
					fmt.Fprintf(cmd.ErrOrStderr(), "not re-sealed: %s\n", f)
				}
				if len(res.Failed) > 0 {
					return fmt.Errorf("%d could not be re-sealed; keep their keys until they are", len(res.Failed))
				}
				return nil
			})
		},
	}
}

func newSecretsPublicKeyCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "public-key",
		Short: "Print the controllers' newest public sealing key (ID:base64), once its signature is trusted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				k, err := g.sealKey(ctx, c)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), k.String())
				return nil
			})
		},
	}
}

func newSecretsDeleteCommand(g *globals) *cobra.Command {
	return newDeleteStoredCommand(g, "secret", "Delete a Secret applied with `flotilla apply` (namespace from -n)", protocol.SecretID)
}

// newDeleteStoredCommand deletes a Secret or ConfigMap applied with
// `flotilla apply`: its workflow ends, and bundles that copy it with
// downstreamResources fail until it is applied again.
func newDeleteStoredCommand(g *globals, kind, short string, id func(namespace, name string) string) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				if err := c.SignalWorkflow(ctx, id(g.Namespace, args[0]), "", protocol.SignalDelete, nil); err != nil {
					return notFound(err, kind+" "+g.Namespace+"/"+args[0])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s/%s deleted\n", kind, g.Namespace, args[0])
				return nil
			})
		},
	}
}

// newConfigMapsCommand manages ConfigMaps applied with `flotilla apply`.
func newConfigMapsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "configmaps", Aliases: []string{"configmap"}, Short: "Manage ConfigMaps applied with `flotilla apply`"}
	cmd.AddCommand(newDeleteStoredCommand(g, "configmap", "Delete a ConfigMap applied with `flotilla apply` (namespace from -n)", protocol.ConfigMapID))
	return cmd
}
