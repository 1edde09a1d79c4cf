package deployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"
)

// ValuesFromAnnotation is the chart annotation, stored with a release
// revision, that records a digest of each Release.ValuesFrom key the
// revision was deployed with (see ValuesDigest). Deploy compares it, as
// well as the deployment ID, to decide whether the release is current.
const ValuesFromAnnotation = "flotilla.dev/values-from"

// DefaultValuesKey is the key of a ValuesRef that names none (Fleet's).
const DefaultValuesKey = "values.yaml"

// ErrValuesFrom marks a Release.ValuesFrom key that cannot be used: its
// ConfigMap or Secret, or the key, does not exist, or it does not hold a
// YAML map. Errors wrapping it name the object and key, never the data.
var ErrValuesFrom = errors.New("valuesFrom")

// ValuesRef names one key of a ConfigMap or Secret on the cluster that
// holds Helm values as YAML: one entry of Fleet's helm.valuesFrom.
type ValuesRef struct {
	// Secret selects a Secret; otherwise a ConfigMap.
	Secret bool
	// Namespace and Name name the object. Namespace is required.
	Namespace, Name string
	// Key is the data key. Optional: default DefaultValuesKey.
	Key string
}

// Kind is "configmap" or "secret".
func (r ValuesRef) Kind() string {
	if r.Secret {
		return "secret"
	}
	return "configmap"
}

// DataKey returns r's key with the default applied.
func (r ValuesRef) DataKey() string {
	if r.Key == "" {
		return DefaultValuesKey
	}
	return r.Key
}

// String names the reference: "configmap ns/name key values.yaml".
func (r ValuesRef) String() string {
	return r.Kind() + " " + r.Namespace + "/" + r.Name + " key " + r.DataKey()
}

// ValuesDigest is the digest of one ValuesRef's data as a revision
// recorded it (or as the cluster holds it now).
type ValuesDigest struct {
	Ref ValuesRef
	// SHA256 is the hex SHA-256 of the key's data.
	SHA256 string
}

// validateValuesRefs checks what the API server would reject in refs.
func validateValuesRefs(refs []ValuesRef) []error {
	var errs []error
	for i, r := range refs {
		var msgs []string
		msgs = append(msgs, prefixed("namespace", validation.IsDNS1123Label(r.Namespace))...)
		msgs = append(msgs, prefixed("name", validation.IsDNS1123Subdomain(r.Name))...)
		msgs = append(msgs, prefixed("key", validation.IsConfigMapKey(r.DataKey()))...)
		for _, m := range msgs {
			errs = append(errs, fmt.Errorf("valuesFrom[%d] (%s): %s", i, r, m))
		}
	}
	return errs
}

func prefixed(what string, msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = what + ": " + m
	}
	return out
}

// resolveValues returns rel's values with each of rel.ValuesFrom, read
// from the cluster with getter's credentials, merged over them in order
// (later keys win, maps merge, anything else is replaced: Fleet's
// precedence, helm.values < helm.valuesFiles < helm.valuesFrom), and the
// digest record of what was read ("" without ValuesFrom). rel.Values is
// not modified.
func resolveValues(ctx context.Context, getter genericclioptions.RESTClientGetter, rel Release) (map[string]any, string, error) {
	if len(rel.ValuesFrom) == 0 {
		return rel.Values, "", nil
	}
	cs, err := newClientset(getter)
	if err != nil {
		return nil, "", err
	}
	values := rel.Values
	digests := make([]ValuesDigest, 0, len(rel.ValuesFrom))
	for _, r := range rel.ValuesFrom {
		data, err := readValuesData(ctx, cs.CoreV1(), r)
		if err != nil {
			return nil, "", err
		}
		digests = append(digests, ValuesDigest{Ref: r, SHA256: sha256Hex(data)})
		var v map[string]any
		if err := yaml.Unmarshal(data, &v); err != nil {
			if r.Secret {
				// The parser quotes what it could not read: a Secret's
				// data stays out of the error.
				return nil, "", fmt.Errorf("%w %s: not a YAML map of values", ErrValuesFrom, r)
			}
			return nil, "", fmt.Errorf("%w %s: not a YAML map of values: %w", ErrValuesFrom, r, err)
		}
		values = fleetyaml.MergeValues(values, v)
	}
	return values, formatDigests(digests), nil
}

// readValuesData returns the data of r's key on the cluster. A missing
// object or key wraps ErrValuesFrom.
func readValuesData(ctx context.Context, core typedcorev1.CoreV1Interface, r ValuesRef) ([]byte, error) {
	key := r.DataKey()
	if r.Secret {
		s, err := core.Secrets(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return nil, valuesReadError(r, err)
		}
		data, ok := s.Data[key]
		if !ok {
			return nil, fmt.Errorf("%w %s: key not found in the secret", ErrValuesFrom, r)
		}
		return data, nil
	}
	cm, err := core.ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return nil, valuesReadError(r, err)
	}
	data, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("%w %s: key not found in the configmap", ErrValuesFrom, r)
	}
	return []byte(data), nil
}

// valuesReadError wraps the error of reading r's object.
func valuesReadError(r ValuesRef, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w %s: %s not found", ErrValuesFrom, r, r.Kind())
	}
	return fmt.Errorf("%w %s: %w", ErrValuesFrom, r, err)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// formatDigests encodes digests for ValuesFromAnnotation, in order:
// "<kind>/<namespace>/<name>/<key>=<sha256>" joined by commas (names and
// keys contain neither '/', '=' nor ',').
func formatDigests(digests []ValuesDigest) string {
	parts := make([]string, len(digests))
	for i, d := range digests {
		parts[i] = d.Ref.Kind() + "/" + d.Ref.Namespace + "/" + d.Ref.Name + "/" + d.Ref.DataKey() + "=" + d.SHA256
	}
	return strings.Join(parts, ",")
}

// parseDigests decodes ValuesFromAnnotation; malformed entries are
// skipped.
func parseDigests(s string) []ValuesDigest {
	if s == "" {
		return nil
	}
	var out []ValuesDigest
	for _, part := range strings.Split(s, ",") {
		ref, sum, ok := strings.Cut(part, "=")
		fields := strings.Split(ref, "/")
		if !ok || len(fields) != 4 || (fields[0] != "configmap" && fields[0] != "secret") {
			continue
		}
		out = append(out, ValuesDigest{Ref: ValuesRef{Secret: fields[0] == "secret", Namespace: fields[1], Name: fields[2],
			Key: fields[3]}, SHA256: sum})
	}
	return out
}

// valuesFromOf returns the digest record of a release revision.
func valuesFromOf(rel *release.Release) string {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return ""
	}
	return rel.Chart.Metadata.Annotations[ValuesFromAnnotation]
}

// ValuesFromDigests returns the digest of each ValuesRef key a release
// revision was deployed with, in order.
func ValuesFromDigests(rel *release.Release) []ValuesDigest { return parseDigests(valuesFromOf(rel)) }

// DigestOf returns the digest of r's data in a ConfigMap's or Secret's
// data map (a Secret's values are raw bytes, a ConfigMap's strings) and
// whether the key is there. It is what Deploy records for r.
func DigestOf(r ValuesRef, configMapData map[string]string, secretData map[string][]byte) (string, bool) {
	if r.Secret {
		data, ok := secretData[r.DataKey()]
		return sha256Hex(data), ok
	}
	data, ok := configMapData[r.DataKey()]
	return sha256Hex([]byte(data)), ok
}
