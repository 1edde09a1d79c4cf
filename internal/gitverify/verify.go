package gitverify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Outcome is what a signature check found.
type Outcome int

// Outcomes of Check.
const (
	// Trusted: signed by a trusted key, and the signature is good.
	Trusted Outcome = iota
	// Unsigned: the object carries no signature.
	Unsigned
	// UnknownKey: signed by a key that is not trusted.
	UnknownKey
	// BadSignature: the signature does not verify with the trusted key
	// it names (the object was changed, or the key expired or was
	// revoked), or it cannot be read.
	BadSignature
	// Unsupported: an X.509 (gpgsm) signature, which is not checked.
	Unsupported
)

// Verdict is the result of checking one object's signature.
type Verdict struct {
	Outcome Outcome
	// Key identifies the signing key when the signature names one: an
	// OpenPGP fingerprint (or key ID) in upper-case hex, or an SSH key's
	// SHA256 fingerprint.
	Key string
	// Owner is a trusted key's owner: the OpenPGP primary user ID or
	// the SSH key's comment. Empty when not Trusted.
	Owner string
	// Detail says why a signature is bad.
	Detail string
}

// OK reports whether the object was signed by a trusted key.
func (v Verdict) OK() bool { return v.Outcome == Trusted }

// Reason says, for a rejection, why; keys names the Secret the trusted
// keys come from.
func (v Verdict) Reason(keys *Keys) string {
	switch v.Outcome {
	case Trusted:
		return ""
	case Unsigned:
		return "not signed"
	case UnknownKey:
		return "signed by a key that is not in " + keys.Source
	case Unsupported:
		return "signed with an X.509 certificate, which spec.verify does not check (use OpenPGP or SSH keys)"
	}
	if v.Detail != "" {
		return "bad signature: " + v.Detail
	}
	return "bad signature"
}

// Signer names a trusted signer: its key and owner.
func (v Verdict) Signer() string {
	if v.Owner == "" {
		return v.Key
	}
	return v.Key + " (" + v.Owner + ")"
}

// SSHNamespace is the namespace git signs commits and tags in.
const SSHNamespace = "git"

// CheckCommit checks the signature of a commit.
func (k *Keys) CheckCommit(c *object.Commit) Verdict { return k.checkObject(c, c.PGPSignature) }

// CheckTag checks the signature of an annotated tag.
func (k *Keys) CheckTag(t *object.Tag) Verdict { return k.checkObject(t, t.PGPSignature) }

// signedObject is a commit or a tag: what its signature covers is its
// encoding without the signature.
type signedObject interface {
	EncodeWithoutSignature(o plumbing.EncodedObject) error
}

func (k *Keys) checkObject(obj signedObject, signature string) Verdict {
	if signature == "" {
		return Verdict{Outcome: Unsigned}
	}
	payload := &plumbing.MemoryObject{}
	if err := obj.EncodeWithoutSignature(payload); err != nil {
		return Verdict{Outcome: BadSignature, Detail: err.Error()}
	}
	return k.check(payload, signature)
}

// check verifies signature over the payload, by the signature's format.
func (k *Keys) check(payload *plumbing.MemoryObject, signature string) Verdict {
	signed, err := payload.Reader()
	if err != nil {
		return Verdict{Outcome: BadSignature, Detail: err.Error()}
	}
	defer func() { _ = signed.Close() }()
	trimmed := strings.TrimSpace(signature)
	switch {
	case strings.HasPrefix(trimmed, "-----BEGIN SSH SIGNATURE-----"):
		return k.checkSSH(signed, trimmed)
	case strings.HasPrefix(trimmed, "-----BEGIN PGP SIGNATURE-----"):
		return k.checkPGP(signed, trimmed)
	case strings.HasPrefix(trimmed, "-----BEGIN SIGNED MESSAGE-----"), strings.HasPrefix(trimmed, "-----BEGIN CERTIFICATE-----"):
		return Verdict{Outcome: Unsupported}
	}
	return Verdict{Outcome: BadSignature, Detail: "unknown signature format"}
}

// checkSSH verifies an SSH signature (PROTOCOL.sshsig, namespace "git").
func (k *Keys) checkSSH(signed io.Reader, armored string) Verdict {
	sig, err := sshsig.Unarmor([]byte(armored))
	if err != nil {
		return Verdict{Outcome: BadSignature, Detail: "unreadable SSH signature: " + err.Error()}
	}
	v := Verdict{Key: ssh.FingerprintSHA256(sig.PublicKey)}
	key, ok := k.findSSH(sig.PublicKey)
	if !ok {
		v.Outcome = UnknownKey
		return v
	}
	if err := sshsig.Verify(signed, sig, key.pub, sig.HashAlgorithm, SSHNamespace); err != nil {
		v.Outcome, v.Detail = BadSignature, err.Error()
		return v
	}
	v.Outcome, v.Owner = Trusted, key.comment
	return v
}

// checkPGP verifies an armored OpenPGP detached signature.
func (k *Keys) checkPGP(signed io.Reader, armored string) Verdict {
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return Verdict{Outcome: BadSignature, Detail: "unreadable OpenPGP signature: " + err.Error()}
	}
	body, err := io.ReadAll(block.Body)
	if err != nil {
		return Verdict{Outcome: BadSignature, Detail: "unreadable OpenPGP signature: " + err.Error()}
	}
	v := Verdict{Key: issuer(body)}
	signer, err := openpgp.CheckDetachedSignature(k.pgp, signed, bytes.NewReader(body), nil)
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		v.Outcome = UnknownKey
		return v
	case err != nil:
		v.Outcome, v.Detail = BadSignature, err.Error()
		return v
	}
	v.Outcome = Trusted
	if signer != nil && signer.PrimaryKey != nil {
		v.Key = fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint)
		if id := signer.PrimaryIdentity(); id != nil {
			v.Owner = id.Name
		}
	}
	return v
}

// issuer names the key of the first signature packet in body: its
// fingerprint when the signature carries it, else its key ID.
func issuer(body []byte) string {
	p, err := packet.Read(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	sig, ok := p.(*packet.Signature)
	switch {
	case !ok:
		return ""
	case len(sig.IssuerFingerprint) > 0:
		return fmt.Sprintf("%X", sig.IssuerFingerprint)
	case sig.IssuerKeyId != nil:
		return fmt.Sprintf("%016X", *sig.IssuerKeyId)
	}
	return ""
}
