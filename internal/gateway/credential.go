package gateway

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// credentialPrefix starts every agent credential, so one found in a log
// or a file is recognisable (and scanners can flag it).
const credentialPrefix = "flga1"

// Labels separate the gateway's MACs from every other use of the keys.
const (
	credentialLabel = "flotilla/gateway/credential/v1"
	taskTokenLabel  = "flotilla/gateway/task/v1"
)

// MACer computes MACs under keys every controller replica holds (the
// sealing keys: seal.Opener).
type MACer interface {
	// MAC is the MAC of msg under the key keyID names.
	MAC(keyID string, msg []byte) ([]byte, error)
	// NewestKeyID names the key new MACs are made with.
	NewestKeyID() string
}

// ErrCredential marks a credential that does not authenticate: malformed,
// made with a key the controller does not hold, or not the cluster's
// current one (the cluster was removed or registered again since).
var ErrCredential = errors.New("agent credential refused")

// Issue returns the credential of cluster's agent for the registration
// epoch (the first run ID of the cluster's workflow chain: a cluster
// removed and registered again gets a new epoch, which revokes every
// credential issued before).
func Issue(m MACer, cluster, epoch string) (string, error) {
	keyID := m.NewestKeyID()
	tag, err := m.MAC(keyID, credentialMessage(cluster, epoch))
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return strings.Join([]string{credentialPrefix, enc.EncodeToString([]byte(cluster)), enc.EncodeToString([]byte(keyID)),
		enc.EncodeToString(tag)}, "."), nil
}

// credential is a parsed credential; it authenticates nothing until
// verified against the cluster's epoch.
type credential struct {
	cluster, keyID string
	tag            []byte
}

// parseCredential splits s. Errors never include s.
func parseCredential(s string) (credential, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 || parts[0] != credentialPrefix {
		return credential{}, fmt.Errorf("%w: not a Flotilla agent credential", ErrCredential)
	}
	enc := base64.RawURLEncoding
	cluster, err1 := enc.DecodeString(parts[1])
	keyID, err2 := enc.DecodeString(parts[2])
	tag, err3 := enc.DecodeString(parts[3])
	if err := errors.Join(err1, err2, err3); err != nil || len(cluster) == 0 || len(tag) == 0 {
		return credential{}, fmt.Errorf("%w: malformed", ErrCredential)
	}
	return credential{cluster: string(cluster), keyID: string(keyID), tag: tag}, nil
}

// verify checks c against the cluster's current epoch.
func (c credential) verify(m MACer, epoch string) error {
	want, err := m.MAC(c.keyID, credentialMessage(c.cluster, epoch))
	if err != nil {
		return fmt.Errorf("%w: cluster %s: made with a key this controller does not hold", ErrCredential, c.cluster)
	}
	if !hmac.Equal(want, c.tag) {
		return fmt.Errorf("%w: cluster %s: not its current credential (was the cluster removed or registered again?)", ErrCredential, c.cluster)
	}
	return nil
}

func credentialMessage(cluster, epoch string) []byte {
	return []byte(credentialLabel + "\x00" + cluster + "\x00" + epoch)
}
