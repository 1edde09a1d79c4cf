// Package gitverify checks the signatures of Git commits and annotated
// tags against a set of trusted public keys: OpenPGP keys (signatures made
// with `git commit -S` and gpg) and SSH keys (gpg.format=ssh, signed with
// ssh-keygen in the "git" namespace). It is the pure part of a GitRepo's
// spec.verify: reading the objects from a clone is gitsource's.
package gitverify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"
)

// ErrNoKeys is returned by ParseKeys for data holding no public key.
var ErrNoKeys = errors.New("no trusted public keys")

// KeyError is a data entry that is neither an armored OpenPGP public key
// nor SSH public keys in authorized_keys format. It names the entry, never
// its content.
type KeyError struct {
	Entry string
	Err   error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("key %q is neither an armored OpenPGP public key nor SSH public keys (authorized_keys format): %v", e.Entry, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// pgpArmorHeader starts an ASCII-armored OpenPGP public key (ring).
const pgpArmorHeader = "-----BEGIN PGP PUBLIC KEY BLOCK-----"

// Keys are the trusted public keys of one Secret.
type Keys struct {
	// Source names where the keys come from ("Secret ns/name"), for
	// rejection reasons.
	Source string
	pgp    openpgp.EntityList
	ssh    []sshKey
	id     string
}

type sshKey struct {
	pub     ssh.PublicKey
	comment string
}

// ParseKeys reads every entry of a Secret's data: an entry holding an
// ASCII-armored OpenPGP public key block (one or more keys, Flux's
// convention) is an OpenPGP key ring; any other entry holds SSH public
// keys in authorized_keys format, one per line (blank lines and # comments
// skipped; options such as namespaces="git" allowed). source names the
// Secret in reasons. An entry that parses as neither is a *KeyError; data
// with no key at all is ErrNoKeys.
func ParseKeys(source string, data map[string][]byte) (*Keys, error) {
	k := &Keys{Source: source}
	names := make([]string, 0, len(data))
	for name := range data {
		names = append(names, name)
	}
	slices.Sort(names)
	sum := sha256.New()
	for _, name := range names {
		v := data[name]
		fmt.Fprintf(sum, "%d:%s%d:", len(name), name, len(v))
		sum.Write(v)
		if len(bytes.TrimSpace(v)) == 0 {
			continue
		}
		if bytes.Contains(v, []byte(pgpArmorHeader)) {
			ring, err := parseArmoredKeys(v)
			if err != nil {
				return nil, &KeyError{Entry: name, Err: err}
			}
			k.pgp = append(k.pgp, ring...)
			continue
		}
		keys, err := parseAuthorizedKeys(v)
		if err != nil {
			return nil, &KeyError{Entry: name, Err: err}
		}
		k.ssh = append(k.ssh, keys...)
	}
	if len(k.pgp) == 0 && len(k.ssh) == 0 {
		return nil, ErrNoKeys
	}
	k.id = hex.EncodeToString(sum.Sum(nil))
	return k, nil
}

// parseArmoredKeys reads one or more armored OpenPGP public key blocks
// (concatenated exports, or one export of several keys).
func parseArmoredKeys(b []byte) (openpgp.EntityList, error) {
	var ring openpgp.EntityList
	blocks := bytes.Split(b, []byte(pgpArmorHeader))
	for _, block := range blocks[1:] {
		keys, err := openpgp.ReadArmoredKeyRing(io.MultiReader(strings.NewReader(pgpArmorHeader), bytes.NewReader(block)))
		if err != nil {
			return nil, err
		}
		ring = append(ring, keys...)
	}
	return ring, nil
}

// parseAuthorizedKeys reads authorized_keys lines.
func parseAuthorizedKeys(b []byte) ([]sshKey, error) {
	var keys []sshKey
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		keys = append(keys, sshKey{pub: pub, comment: comment})
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in it")
	}
	return keys, nil
}

// ID identifies the key set (a hash of the Secret's data): verdicts may be
// remembered per object and ID.
func (k *Keys) ID() string { return k.id }

// findSSH returns the trusted SSH key equal to pub.
func (k *Keys) findSSH(pub ssh.PublicKey) (sshKey, bool) {
	want := pub.Marshal()
	for _, key := range k.ssh {
		if bytes.Equal(key.pub.Marshal(), want) {
			return key, true
		}
	}
	return sshKey{}, false
}
