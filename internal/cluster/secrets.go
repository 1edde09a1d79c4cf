package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
}

// Save validates sec and stores its credentials (see api.Secret.Credentials;
// other keys are dropped). An empty namespace is api.DefaultNamespace.
func (s *SecretStore) Save(sec api.Secret) error {
	if sec.Metadata.Namespace == "" {
		sec.Metadata.Namespace = api.DefaultNamespace
	}
	ns, name := sec.Metadata.Namespace, sec.Metadata.Name
	if err := validateSecretName(ns, name); err != nil {
		return err
	}
	if err := sec.Validate(); err != nil {
		return fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	var st storedSecret
	st.Username, st.Password = sec.Credentials()
	if keys := sec.WebhookKeys(); len(keys) > 0 {
		st.Webhook = keys
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("secret %s/%s: encode: %w", ns, name, err)
	}
	if err := writeFileAtomic(filepath.Join(s.dir, ns), name+".json", data); err != nil {
		return fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return nil
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
	if err := validateSecretName(namespace, name); err != nil {
		return storedSecret{}, err
	}
	data, err := os.ReadFile(s.path(namespace, name))
	if errors.Is(err, os.ErrNotExist) {
		return storedSecret{}, fmt.Errorf("secret %s/%s %w in %s", namespace, name, ErrNotFound, s.dir)
	}
	if err != nil {
		return storedSecret{}, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	var st storedSecret
	if err := json.Unmarshal(data, &st); err != nil {
		// The decoder's message may quote the file; name the file instead.
		return storedSecret{}, fmt.Errorf("secret %s/%s: %s is not a stored secret", namespace, name, s.path(namespace, name))
	}
	return st, nil
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
