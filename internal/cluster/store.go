package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigExt ends every stored kubeconfig's file name.
const kubeconfigExt = ".kubeconfig"

// Store keeps one self-contained kubeconfig per cluster, as
// <dir>/<name>.kubeconfig. It holds no state besides dir, so any number of
// Stores (in any number of processes) may share a directory.
type Store struct {
	dir string
}

// NewStore returns a Store over dir (normally <state-dir>/clusters), which
// is created with mode 0700 on the first Save.
func NewStore(dir string) *Store { return &Store{dir: dir} }

// Save stores kubeconfig for cluster name and returns the SHA-256 (hex) of
// the bytes written. Only contextName is kept (empty: the kubeconfig's
// current-context), with its cluster and user, which must hold inline
// data only: a command, file path or proxy-url in them is a
// *KubeconfigError (see CheckKubeconfig). The result must yield a REST
// client configuration, or nothing is written. Errors never include the
// kubeconfig's content.
func (s *Store) Save(name string, kubeconfig []byte, contextName string) (string, error) {
	if err := validateClusterName(name); err != nil {
		return "", err
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", parseError(name, err)
	}
	return s.save(name, "", cfg, contextName)
}

// SaveFile is Save with the kubeconfig read from path.
func (s *Store) SaveFile(name, path, contextName string) (string, error) {
	if err := validateClusterName(name); err != nil {
		return "", err
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster %q: read %s: %w: %w", name, path, ErrInvalidKubeconfig, err)
	}
	return s.save(name, path, cfg, contextName)
}

func (s *Store) save(name, file string, cfg *clientcmdapi.Config, contextName string) (string, error) {
	data, err := prepare(name, file, cfg, contextName)
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(s.dir, name+kubeconfigExt, data); err != nil {
		return "", fmt.Errorf("cluster %q: %w", name, err)
	}
	return hashOf(data), nil
}

// ReadKubeconfig reads the kubeconfig file at path for cluster name and
// returns it as Store.SaveFile would store it (one context, inline data
// only), with its SHA-256 (hex), without writing anything: what `flotilla
// cluster add` seals. A command, file path or proxy-url in the context's
// cluster or user is a *KubeconfigError naming each and saying what to
// embed instead; no file it names is read. Errors never include the
// content.
func ReadKubeconfig(name, path, contextName string) (data []byte, hash string, err error) {
	if err := validateClusterName(name); err != nil {
		return nil, "", err
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("cluster %q: read %s: %w: %w", name, path, ErrInvalidKubeconfig, err)
	}
	if data, err = prepare(name, path, cfg, contextName); err != nil {
		return nil, "", err
	}
	return data, hashOf(data), nil
}

// PrepareKubeconfig is ReadKubeconfig for a kubeconfig held in memory
// (the management controller reads it from a Cluster's kubeConfigSecret):
// it returns the kubeconfig reduced to contextName (empty: its current
// context) with inline data only, and its SHA-256 (hex), or a
// *KubeconfigError naming each field that is not inline data. Errors
// never include the kubeconfig's content.
func PrepareKubeconfig(name string, kubeconfig []byte, contextName string) (data []byte, hash string, err error) {
	if err := validateClusterName(name); err != nil {
		return nil, "", err
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, "", parseError(name, err)
	}
	if data, err = prepare(name, "", cfg, contextName); err != nil {
		return nil, "", err
	}
	return data, hashOf(data), nil
}

// prepare reduces cfg (read from file, when not empty) to contextName
// (empty: its current context), refuses what is not inline data in it,
// checks that it yields a REST client configuration and encodes it.
func prepare(name, file string, cfg *clientcmdapi.Config, contextName string) ([]byte, error) {
	secrets := configSecrets(cfg)
	fail := func(step string, err error) error {
		// The error came from code that saw the secrets; keep only its
		// scrubbed text.
		return fmt.Errorf("cluster %q: %w: %s: %s", name, ErrInvalidKubeconfig, step, scrub(err.Error(), secrets))
	}
	chosen, err := chooseContext(cfg, contextName)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	cfg.CurrentContext = chosen
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return nil, fail("select context "+chosen, err)
	}
	if errs := stripConfig(cfg.DeepCopy()); len(errs) > 0 {
		return nil, &KubeconfigError{Cluster: name, File: file, Errs: errs}
	}
	if _, err := inlineRESTConfig(cfg); err != nil {
		return nil, fail("build client configuration", err)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fail("encode", err)
	}
	return data, nil
}

// RESTConfigFrom builds the REST client configuration of cluster name
// from a stored kubeconfig with SafeRESTConfig, dropping (without a word)
// anything that is not inline data. Errors never include the content.
func RESTConfigFrom(name string, data []byte) (*rest.Config, error) {
	cfg, _, err := SafeRESTConfig(name, data)
	return cfg, err
}

// Read returns cluster name's stored kubeconfig and its SHA-256 (hex).
func (s *Store) Read(name string) (data []byte, hash string, err error) {
	data, err = s.read(name)
	if err != nil {
		return nil, "", err
	}
	return data, hashOf(data), nil
}

// chooseContext returns the context to keep; a missing one is an error
// listing the available context names.
func chooseContext(cfg *clientcmdapi.Config, name string) (string, error) {
	available := make([]string, 0, len(cfg.Contexts))
	for n := range cfg.Contexts {
		available = append(available, n)
	}
	sort.Strings(available)
	list := strings.Join(available, ", ")
	if len(available) == 0 {
		list = "none"
	}
	switch {
	case name == "" && cfg.CurrentContext == "":
		return "", fmt.Errorf("%w: no context given and no current-context set (available: %s)", ErrInvalidKubeconfig, list)
	case name == "":
		name = cfg.CurrentContext
	}
	if _, ok := cfg.Contexts[name]; !ok {
		return "", fmt.Errorf("%w: context %q not found (available: %s)", ErrInvalidKubeconfig, name, list)
	}
	return name, nil
}

// configSecrets lists the secret values in cfg, for scrubbing messages.
func configSecrets(cfg *clientcmdapi.Config) []string {
	var out []string
	for _, ai := range cfg.AuthInfos {
		out = append(out, ai.Token, ai.Password, string(ai.ClientKeyData))
		if ai.AuthProvider != nil {
			for _, v := range ai.AuthProvider.Config {
				out = append(out, v)
			}
		}
		if ai.Exec != nil {
			for _, e := range ai.Exec.Env {
				out = append(out, e.Value)
			}
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// RESTConfig returns the REST client configuration of cluster name.
func (s *Store) RESTConfig(name string) (*rest.Config, error) {
	data, err := s.read(name)
	if err != nil {
		return nil, err
	}
	return RESTConfigFrom(name, data)
}

// Hash returns the SHA-256 (hex) of cluster name's stored kubeconfig, as
// Save returned it.
func (s *Store) Hash(name string) (string, error) {
	data, err := s.read(name)
	if err != nil {
		return "", err
	}
	return hashOf(data), nil
}

// Remove deletes cluster name's kubeconfig; removing a cluster that is not
// stored is not an error.
func (s *Store) Remove(name string) error {
	if err := validateClusterName(name); err != nil {
		return err
	}
	return removeFile(s.path(name))
}

// Names returns the stored clusters, sorted. A store never written to is
// empty.
func (s *Store) Names() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list clusters in %s: %w", s.dir, err)
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), kubeconfigExt)
		if ok && e.Type().IsRegular() && validateClusterName(name) == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name+kubeconfigExt) }

func (s *Store) read(name string) ([]byte, error) {
	if err := validateClusterName(name); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster %q %w in %s", name, ErrNotFound, s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	return data, nil
}

func validateClusterName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("cluster %q: %w: %s", name, ErrInvalidName, strings.Join(msgs, "; "))
	}
	return nil
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
