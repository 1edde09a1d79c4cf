package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// SecretStore keeps the Git credentials of basic-auth Secrets and the keys
// of webhook Secrets, as <dir>/<namespace>/<name>.json holding only those.
type SecretStore struct {
	dir string
}

// NewSecretStore returns a SecretStore over dir (normally
// <state-dir>/secrets), created with mode 0700 on the first Save.
func NewSecretStore(dir string) *SecretStore { return &SecretStore{dir: dir} }

// storedSecret is the file format.
type storedSecret struct {
	Username string            `json:"username"`
	Password string            `json:"password"`
	Webhook  map[string]string `json:"webhook,omitempty"`
	// Data is every key of the Secret (data and stringData), what a
	// bundle copies to its clusters (downstreamResources). Contents sealed
	// by older versions have none; the file store never keeps it.
	Data map[string][]byte `json:"data,omitempty"`
}

// Save validates sec and stores its credentials (see api.Secret.Credentials;
// other keys are dropped). An empty namespace is api.DefaultNamespace.
func (s *SecretStore) Save(sec api.Secret) error {
	if sec.Metadata.Namespace == "" {
		sec.Metadata.Namespace = api.DefaultNamespace
	}
	ns, name := sec.Metadata.Namespace, sec.Metadata.Name
	if err := sec.ValidateCredentials(); err != nil {
		return fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	data, err := encodeSecret(sec, false)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(s.dir, ns), name+".json", data); err != nil {
		return fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// EncodeSecret validates sec and returns its content as stored (the
// credentials, the webhook keys and all of its data): what `flotilla
// apply` seals. An empty namespace is api.DefaultNamespace.
func EncodeSecret(sec api.Secret) ([]byte, error) {
	return encodeSecret(sec, true)
}

// encodeSecret is EncodeSecret; without all, only the credentials and
// webhook keys are kept (the file store of older versions).
func encodeSecret(sec api.Secret, all bool) ([]byte, error) {
	if sec.Metadata.Namespace == "" {
		sec.Metadata.Namespace = api.DefaultNamespace
	}
	ns, name := sec.Metadata.Namespace, sec.Metadata.Name
	if err := validateSecretName(ns, name); err != nil {
		return nil, err
	}
	if err := sec.Validate(); err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	var st storedSecret
	st.Username, st.Password = sec.Credentials()
	if keys := sec.WebhookKeys(); len(keys) > 0 {
		st.Webhook = keys
	}
	if all {
		st.Data = sec.AllData()
	}
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: encode: %w", ns, name, err)
	}
	return data, nil
}

// decodeSecret reads what EncodeSecret wrote; the message never quotes
// the content.
func decodeSecret(namespace, name string, data []byte) (storedSecret, error) {
	var st storedSecret
	if err := json.Unmarshal(data, &st); err != nil {
		return storedSecret{}, fmt.Errorf("secret %s/%s: not a stored secret", namespace, name)
	}
	if st.Webhook == nil {
		st.Webhook = map[string]string{}
	}
	return st, nil
}

// ContentKeys names the keys a stored content holds, sorted: what a
// SecretRecord shows. Content sealed by older versions holds only
// username, password and the webhook keys that are set.
func ContentKeys(namespace, name string, data []byte) ([]string, error) {
	st, err := decodeSecret(namespace, name, data)
	if err != nil {
		return nil, err
	}
	if st.Data != nil {
		keys := make([]string, 0, len(st.Data))
		for k := range st.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys, nil
	}
	var keys []string
	if st.Username != "" {
		keys = append(keys, "username")
	}
	if st.Password != "" {
		keys = append(keys, "password")
	}
	for k := range st.Webhook {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

// Read returns namespace/name's stored content, as EncodeSecret made it.
func (s *SecretStore) Read(namespace, name string) ([]byte, error) {
	if err := validateSecretName(namespace, name); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.path(namespace, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("secret %s/%s %w in %s", namespace, name, ErrNotFound, s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return data, nil
}

// Names returns the stored secrets as namespace/name pairs, sorted. A
// store never written to is empty.
func (s *SecretStore) Names() ([][2]string, error) {
	nss, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list secrets in %s: %w", s.dir, err)
	}
	var out [][2]string
	for _, ns := range nss {
		if !ns.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.dir, ns.Name()))
		if err != nil {
			return nil, fmt.Errorf("list secrets in %s: %w", s.dir, err)
		}
		for _, f := range files {
			name, ok := strings.CutSuffix(f.Name(), ".json")
			if ok && f.Type().IsRegular() && validateSecretName(ns.Name(), name) == nil {
				out = append(out, [2]string{ns.Name(), name})
			}
		}
	}
	return out, nil // ReadDir sorts
}

// Load returns the credentials stored for namespace/name.
func (s *SecretStore) Load(namespace, name string) (username, password string, err error) {
	st, err := s.read(namespace, name)
	return st.Username, st.Password, err
}

// LoadWebhook returns the webhook keys stored for namespace/name (see
// api.WebhookSecretKeys); a Secret without any is an empty map.
func (s *SecretStore) LoadWebhook(namespace, name string) (map[string]string, error) {
	st, err := s.read(namespace, name)
	if st.Webhook == nil {
		st.Webhook = map[string]string{}
	}
	return st.Webhook, err
}

func (s *SecretStore) read(namespace, name string) (storedSecret, error) {
	data, err := s.Read(namespace, name)
	if err != nil {
		return storedSecret{}, err
	}
	return decodeSecret(namespace, name, data)
}

// Remove deletes namespace/name; removing a secret that is not stored is
// not an error.
func (s *SecretStore) Remove(namespace, name string) error {
	if err := validateSecretName(namespace, name); err != nil {
		return err
	}
	return removeFile(s.path(namespace, name))
}

func (s *SecretStore) path(namespace, name string) string {
	return filepath.Join(s.dir, namespace, name+".json")
}

// validateSecretName checks the Kubernetes rules, which also keep both
// names single, safe path components.
func validateSecretName(namespace, name string) error {
	msgs := validation.IsDNS1123Label(namespace)
	for _, m := range validation.IsDNS1123Subdomain(name) {
		msgs = append(msgs, "name: "+m)
	}
	if len(msgs) > 0 {
		return fmt.Errorf("secret %q/%q: %w: %s", namespace, name, ErrInvalidName, strings.Join(msgs, "; "))
	}
	return nil
}
