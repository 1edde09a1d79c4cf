package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// defaultSealKeysDir is where a controller without --seal-keys keeps its
// sealing keys, under its state dir.
const defaultSealKeysDir = "seal-keys"

// openSealing loads the controller's sealing keys: --seal-keys, or
// <state-dir>/seal-keys, where a first key is generated when there is
// none. Only the explicit directory makes the state dir a pure cache.
func (o *options) openSealing(c client.Client, logger *zap.Logger) (*activities.Sealing, error) {
	var ring *keyring.Ring
	var err error
	if o.SealKeys != "" {
		if ring, err = keyring.LoadDir(o.SealKeys); err != nil {
			return nil, fmt.Errorf("--seal-keys: %w (create a key with `flotilla-worker keygen --out %s`)", err, o.SealKeys)
		}
	} else {
		dir := filepath.Join(o.DevSrv.StateDir, defaultSealKeysDir)
		var created bool
		if ring, created, err = keyring.LoadOrCreate(dir); err != nil {
			return nil, err
		}
		if created {
			logger.Info("Generated a sealing key", zap.String("keyID", ring.Newest().ID), zap.String("dir", dir))
		}
		if !o.devMode() {
			logger.Warn("The sealing keys are kept in the state dir: losing it makes every sealed kubeconfig and Secret unreadable. "+
				"Give every controller replica the same keys with --seal-keys (a mounted Secret).", zap.String("dir", dir))
		}
	}
	opener, err := seal.NewOpener(ring)
	if err != nil {
		return nil, err
	}
	return &activities.Sealing{Vault: cluster.NewVault(c, opener, logger), Opener: opener}, nil
}

// publishKeys tells Temporal this controller's public keys, so the CLI
// seals new secrets to the newest. A key ID another controller published
// with different key material stops this one: it could not open what the
// CLI seals.
func publishKeys(ctx context.Context, c client.Client, queue string, s *activities.Sealing, logger *zap.Logger) error {
	rec, err := cluster.PublishKeys(ctx, c, queue, s.Opener.PublicKeys())
	if err != nil {
		return fmt.Errorf("publish the sealing keys: %w", err)
	}
	newest, _ := seal.Newest(rec.Keys)
	held := s.Opener.PublicKeys()
	if !slices.ContainsFunc(held, func(k seal.PublicKey) bool { return k.ID == newest.ID }) {
		logger.Warn("Another controller published a newer sealing key that this one does not hold: it cannot open secrets sealed to it; give it the same --seal-keys",
			zap.String("newestKeyID", newest.ID))
	}
	logger.Info("Published sealing keys", zap.Strings("keyIDs", keyIDs(held)), zap.String("newestKeyID", newest.ID))
	return nil
}

func keyIDs(keys []seal.PublicKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ID
	}
	return out
}

// importStateDir seals what an older Flotilla kept in plain files under the
// state dir (clusters/NAME.kubeconfig, secrets/NS/NAME.json) into
// Temporal, for each registered cluster without a sealed kubeconfig and
// each Secret not yet in Temporal. The files are left as they are.
func importStateDir(ctx context.Context, c client.Client, queue, dir string, s *activities.Sealing, logger *zap.Logger) {
	key := s.Opener.Newest()
	kubeconfigs := importKubeconfigs(ctx, c, queue, cluster.NewStore(filepath.Join(dir, "clusters")), key, s.Vault, logger)
	secrets := importSecrets(ctx, c, queue, cluster.NewSecretStore(filepath.Join(dir, "secrets")), key, s.Vault, logger)
	if kubeconfigs+secrets > 0 {
		logger.Info("Imported the state dir's kubeconfigs and secrets into Temporal, sealed; the files are left in place",
			zap.Int("kubeconfigs", kubeconfigs), zap.Int("secrets", secrets), zap.String("stateDir", dir))
	}
}

func importKubeconfigs(ctx context.Context, c client.Client, queue string, store *cluster.Store, key seal.PublicKey,
	vault *cluster.Vault, logger *zap.Logger) int {
	names, err := store.Names()
	if err != nil {
		logger.Warn("Cannot list the state dir's kubeconfigs to import them", zap.Error(err))
	}
	n := 0
	for _, name := range names {
		box, found, err := vault.Kubeconfig(ctx, name)
		if err != nil || !found || !box.IsZero() {
			continue // not registered (any more), or already sealed
		}
		var rec protocol.ClusterRecord
		v, err := c.QueryWorkflow(ctx, protocol.ClusterID(name), "", protocol.QueryStatus)
		if err == nil {
			err = v.Get(&rec)
		}
		data, hash, rerr := store.Read(name)
		err = errors.Join(err, rerr)
		var sealed seal.Box
		if err == nil {
			sealed, err = seal.Seal(key, data)
		}
		if err == nil {
			_, err = temporalx.ApplyCluster(ctx, c, queue, name, protocol.ClusterApply{KubeconfigHash: hash, Context: rec.Context, Kubeconfig: &sealed})
		}
		if err != nil {
			logger.Warn("Cannot import a kubeconfig from the state dir", zap.String("cluster", name), zap.Error(err))
			continue
		}
		n++
	}
	return n
}

func importSecrets(ctx context.Context, c client.Client, queue string, store *cluster.SecretStore, key seal.PublicKey,
	vault *cluster.Vault, logger *zap.Logger) int {
	pairs, err := store.Names()
	if err != nil {
		logger.Warn("Cannot list the state dir's secrets to import them", zap.Error(err))
	}
	n := 0
	for _, p := range pairs {
		ns, name := p[0], p[1]
		if _, err := vault.Secret(ctx, ns, name); !errors.Is(err, cluster.ErrNotFound) {
			continue // in Temporal already (or unreadable now: try at the next start)
		}
		data, err := store.Read(ns, name)
		var keys []string
		if err == nil {
			keys, err = cluster.ContentKeys(ns, name, data)
		}
		var sealed seal.Box
		if err == nil {
			sealed, err = seal.Seal(key, data)
		}
		if err == nil {
			_, err = temporalx.ApplySecret(ctx, c, queue, protocol.SecretRecord{Namespace: ns, Name: name, Keys: keys, Sealed: sealed})
		}
		if err != nil {
			logger.Warn("Cannot import a secret from the state dir", zap.String("secret", ns+"/"+name), zap.Error(err))
			continue
		}
		n++
	}
	return n
}

// newKeygenCommand writes a new key into a keyring directory: a sealing
// key for --seal-keys, or an AES key for --payload-keys (same format).
func newKeygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Add a new key to a keyring directory (--seal-keys or --payload-keys); it becomes the newest",
		Long: `Keygen writes a new random 32-byte key into DIR as a file named by its ID (fk-<UTC time>),
mode 0600, and prints the ID. The newest key (greatest ID) encrypts new data; keep the older
keys until everything is re-sealed (flotilla secrets rotate). To use it from Kubernetes:
  kubectl create secret generic flotilla-seal-keys --from-file=DIR`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			k, err := keyring.Generate()
			if err != nil {
				return err
			}
			if err := keyring.WriteKey(out, k); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "keyring directory (created when missing)")
	return cmd
}
