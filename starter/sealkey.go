package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/sealtrust"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// sealTrust is how the CLI decides which published sealing key to seal
// to: only one signed by the controllers' signing key, pinned on first use
// or given by its fingerprint.
type sealTrust struct {
	// Fingerprint is --seal-key-fingerprint.
	Fingerprint string
	// PinsFile is --known-seal-keys.
	PinsFile string
	// key is the key decided on, reused by every seal of one command.
	key *seal.PublicKey
	// stderr is where a pinned signer or a changed key is told.
	stderr io.Writer
}

func (s *sealTrust) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Fingerprint, "seal-key-fingerprint", "", "seal kubeconfigs and Secrets only to a sealing key signed by the controllers' signing key of this "+
		"fingerprint (SHA256:..., as a controller logs it at start), and pin it; default: the signing key pinned on first use")
	fs.StringVar(&s.PinsFile, "known-seal-keys", "", "file of the controllers' signing keys this CLI trusts, per Temporal address and namespace "+
		"(default <user config dir>/flotilla/known-seal-keys)")
}

func (s *sealTrust) pins() (sealtrust.Pins, error) {
	if s.PinsFile != "" {
		return sealtrust.Pins{Path: s.PinsFile}, nil
	}
	path, err := sealtrust.DefaultPath()
	return sealtrust.Pins{Path: path}, err
}

// target names the Temporal namespace c is connected to, with the
// namespace's ID when the server tells it.
func (g *globals) sealTarget(ctx context.Context, c client.Client) sealtrust.Target {
	t := sealtrust.Target{Address: g.Temporal.Address, Namespace: g.Temporal.Namespace, NamespaceID: "-"}
	if t.Namespace == "" {
		t.Namespace = temporalx.DefaultNamespace
	}
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.Namespace})
	if err == nil && resp.GetNamespaceInfo().GetId() != "" {
		t.NamespaceID = resp.GetNamespaceInfo().GetId()
	}
	return t
}

// sealKey returns the published sealing key to seal to, refusing one not
// signed by the trusted signing key (sealtrust.Decide); a newly pinned
// signer or a changed key is recorded and told on stderr.
func (g *globals) sealKey(ctx context.Context, c client.Client) (seal.PublicKey, error) {
	s := &g.Seal
	if s.key != nil {
		return *s.key, nil
	}
	keys, err := cluster.PublishedKeys(ctx, c)
	if err != nil {
		return seal.PublicKey{}, err
	}
	pins, err := s.pins()
	if err != nil {
		return seal.PublicKey{}, err
	}
	target := g.sealTarget(ctx, c)
	pin, err := pins.Load(target)
	if err != nil {
		return seal.PublicKey{}, err
	}
	d, err := sealtrust.Decide(keys, pin, s.Fingerprint, pins.Path)
	if err != nil {
		return seal.PublicKey{}, err
	}
	if d.Changed() {
		if err := pins.Save(target, d.Pin); err != nil {
			return seal.PublicKey{}, err
		}
		out := s.stderr
		if out == nil {
			out = os.Stderr
		}
		fmt.Fprintln(out, "flotilla: "+sealtrust.Describe(d, target.String()))
	}
	s.key = &d.Key
	return d.Key, nil
}

// sealData seals data to the newest key the controllers published, once
// its signature is trusted.
func (g *globals) sealData(ctx context.Context, c client.Client, data []byte) (seal.Box, error) {
	key, err := g.sealKey(ctx, c)
	if err != nil {
		return seal.Box{}, err
	}
	return seal.Seal(key, data)
}

// newSecretsSignerCommand prints the signing key the published sealing
// key is signed by and the one this CLI trusts, pinning nothing.
func newSecretsSignerCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "signer",
		Short: "Print the fingerprint of the signing key the published sealing key is signed by, and the one this CLI trusts",
		Long: `Signer prints the fingerprint of the signing key that signed the controllers' newest published
sealing key, and the fingerprint this CLI pinned for the Temporal namespace. Compare them with the
fingerprint a controller logs at start. Nothing is pinned.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				keys, err := cluster.PublishedKeys(ctx, c)
				if err != nil {
					return err
				}
				newest, _ := seal.Newest(keys)
				published := "unsigned"
				if err := newest.Verify(); err == nil {
					published = seal.Fingerprint(newest.Signer)
				} else if len(newest.Signer) > 0 {
					published = seal.Fingerprint(newest.Signer) + " (the signature does not verify)"
				}
				pins, err := g.Seal.pins()
				if err != nil {
					return err
				}
				target := g.sealTarget(ctx, c)
				pin, err := pins.Load(target)
				if err != nil {
					return err
				}
				pinned := "none"
				if pin != nil {
					pinned = pin.Fingerprint + " (in " + pins.Path + ")"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "published: %s (sealing key %s)\npinned:    %s\n", published, newest.ID, pinned)
				return nil
			})
		},
	}
}
