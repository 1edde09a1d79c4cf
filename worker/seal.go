package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
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
		if ring, err = keyring.LoadSealing(o.SealKeys); err != nil {
			return nil, fmt.Errorf("--seal-keys: %w (create a key with `flotilla-worker keygen --out %s`)", err, o.SealKeys)
		}
	} else {
		dir := filepath.Join(o.DevSrv.StateDir, defaultSealKeysDir)
		var created bool
		if ring, created, err = keyring.LoadOrCreateSealing(dir); err != nil {
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

// publishKeys tells Temporal this controller's public keys, each signed
// by its signing key, so the CLI seals new secrets to the newest once it
// verified the signature. A key ID another controller published with
// different key material stops this one: it could not open what the CLI
// seals. Published keys signed by another signing key are not
// overwritten: the refusal is logged as an error and the controller runs
// on (it still opens what was sealed to its keys).
func publishKeys(ctx context.Context, c client.Client, queue string, s *activities.Sealing, logger *zap.Logger) error {
	signer := s.Opener.Signer()
	if signer == nil {
		return errors.New("publish the sealing keys: the keyring came without the signing key")
	}
	fingerprint := zap.String("signingKey", signer.Fingerprint())
	logger.Info("The sealing keys are signed by this signing key: the CLI pins its fingerprint on first use (or takes --seal-key-fingerprint)", fingerprint)
	rec, err := cluster.PublishKeys(ctx, c, queue, s.Opener.SignedPublicKeys())
	if ae := (*temporal.ApplicationError)(nil); errors.As(err, &ae) && ae.Type() == seal.ErrTypeForeignSigner {
		logger.Error("REFUSED to publish the sealing keys over keys this controller did not sign: whoever published them holds "+
			"another signing key (someone with access to the Temporal namespace, or a controller given other --seal-keys). "+
			"They are left as they are and the CLI refuses to seal to them. After finding out who published them, "+
			"terminate the workflow "+protocol.KeysID+" and restart a controller to publish its keys again.", fingerprint, zap.Error(err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish the sealing keys: %w", err)
	}
	newest, _ := seal.Newest(rec.Keys)
	held := s.Opener.PublicKeys()
	if !slices.ContainsFunc(held, func(k seal.PublicKey) bool { return k.ID == newest.ID }) {
		logger.Warn("Another controller published a newer sealing key that this one does not hold: it cannot open secrets sealed to it; give it the same --seal-keys",
			zap.String("newestKeyID", newest.ID))
	}
	if !newest.SignedBy(signer.Public()) {
		logger.Warn("The newest published sealing key is not signed by this controller's signing key: the CLI refuses to seal to it until a controller of this version publishes it signed",
			zap.String("newestKeyID", newest.ID), fingerprint)
	}
	logger.Info("Published sealing keys", zap.Strings("keyIDs", keyIDs(held)), zap.String("newestKeyID", newest.ID), fingerprint)
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
// key for --seal-keys, or an AES key for --payload-keys (same format); or,
// with --signing-key, the controllers' signing key.
func newKeygenCommand() *cobra.Command {
	var out string
	var signing bool
	cmd := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Add a new key to a keyring directory (--seal-keys or --payload-keys); it becomes the newest",
		Long: `Keygen writes a new random 32-byte key into DIR as a file named by its ID (fk-<UTC time>),
mode 0600, and prints the ID. The newest key (greatest ID) encrypts new data; keep the older
keys until everything is re-sealed (flotilla secrets rotate). To use it from Kubernetes:
  kubectl create secret generic flotilla-seal-keys --from-file=DIR

With --signing-key it writes the controllers' signing key (file signing-key) into a
--seal-keys DIR instead, unless DIR holds one, and prints its fingerprint: what the CLI
pins, or takes with --seal-key-fingerprint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			if signing {
				return printSigningKey(cmd, out)
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
	cmd.Flags().BoolVar(&signing, "signing-key", false, "write the controllers' signing key into the --seal-keys DIR unless it holds one, and print its fingerprint")
	return cmd
}

// printSigningKey generates dir's signing key when it holds none and
// prints its fingerprint.
func printSigningKey(cmd *cobra.Command, dir string) error {
	seed, _, err := keyring.LoadOrCreateSigningKey(dir)
	if err != nil {
		return err
	}
	s, err := seal.NewSigner(seed)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), s.Fingerprint())
	return nil
}
