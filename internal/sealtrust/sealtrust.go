// Package sealtrust decides whether the CLI may seal to the sealing key
// the controllers published. Anyone with access to the Temporal namespace
// can publish keys, so a key counts only if it is signed (package seal)
// by a signing key the CLI already trusts: one it pinned the first time
// it met these controllers (trust on first use, like SSH host keys), or
// the one whose fingerprint the user gives. Decide is the pure decision;
// Pins is the file the pins are kept in.
package sealtrust

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// FlagName is the CLI flag that gives the trusted signer's fingerprint.
const FlagName = "--seal-key-fingerprint"

// Reason is why a published key is refused.
type Reason string

// The reasons.
const (
	// Unsigned: the newest key carries no signature.
	Unsigned Reason = "Unsigned"
	// BadSignature: its signature does not verify.
	BadSignature Reason = "BadSignature"
	// UntrustedSigner: it is signed by another signing key than the one
	// pinned.
	UntrustedSigner Reason = "UntrustedSigner"
	// WrongFingerprint: it is signed by another signing key than the one
	// given with --seal-key-fingerprint.
	WrongFingerprint Reason = "WrongFingerprint"
	// Rollback: it is older than the key the CLI sealed to before: the
	// published keys were replaced by older ones (an older key may be the
	// one rotated away because it leaked).
	Rollback Reason = "Rollback"
)

// RefusedError is a published key the CLI does not seal to. Its Error
// says why and how to trust a new signing key on purpose.
type RefusedError struct {
	Reason Reason
	// KeyID is the refused sealing key.
	KeyID string
	// Signer is the fingerprint of the key's signer ("" when unsigned).
	Signer string
	// Trusted is the fingerprint the CLI trusts (pinned or given).
	Trusted string
	// Where names the pins file (UntrustedSigner, Rollback).
	Where string
	// Previous is the key sealed to before (Rollback).
	Previous string
}

func (e *RefusedError) Error() string {
	head := "refusing to seal to the controllers' sealing key " + e.KeyID + ": "
	repin := "; if the controllers' signing key was replaced on purpose, compare the fingerprint a controller logs at start " +
		"(\"The sealing keys are signed by this signing key\", or `flotilla-worker keygen --signing-key --out <its --seal-keys>`) " +
		"and run the command again with " + FlagName + " <that fingerprint>, which pins it"
	switch e.Reason {
	case Unsigned:
		return head + "it is not signed, so anyone with access to the Temporal namespace could have published it " +
			"(controllers sign their keys since this version: upgrade them, or someone replaced their keys)" + repin
	case BadSignature:
		return head + "its signature by " + e.Signer + " does not verify: it was altered or forged" + repin
	case WrongFingerprint:
		return head + "it is signed by " + e.Signer + ", not by the " + e.Trusted + " given with " + FlagName
	case Rollback:
		return head + "it is older than " + e.Previous + ", the key this CLI sealed to before: the published keys were replaced by older ones. " +
			"If the controllers' newer key was removed on purpose, delete this namespace's line from " + e.Where + " and run the command again"
	default:
		return head + "it is signed by " + e.Signer + ", not by " + e.Trusted + ", the controllers' signing key pinned in " + e.Where +
			": someone with access to the Temporal namespace may have published a key of their own" + repin
	}
}

// Pin is what the CLI trusts for one Temporal namespace: the signer's
// fingerprint and the sealing key it last sealed to.
type Pin struct {
	Fingerprint string
	KeyID       string
}

// Decision is a published key the CLI may seal to.
type Decision struct {
	Key seal.PublicKey
	// Pin is what to keep for the namespace from now on.
	Pin Pin
	// Pinned: the signer was not trusted before (first use, or a new
	// fingerprint given with the flag); tell the user its fingerprint.
	Pinned bool
	// Given: the signer is the one given with the flag.
	Given bool
	// PreviousKeyID is the sealing key sealed to before, when the newest
	// key is another one of the same signer; tell the user.
	PreviousKeyID string
}

// Changed reports whether Pin differs from what was kept.
func (d Decision) Changed() bool { return d.Pinned || d.PreviousKeyID != "" }

var fingerprintPattern = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)

// ErrInvalidFingerprint: a --seal-key-fingerprint that is not one.
var ErrInvalidFingerprint = errors.New(`invalid ` + FlagName + `: want "SHA256:" and 43 characters of base64, as a controller logs it`)

// ValidateFingerprint checks the form of a given fingerprint.
func ValidateFingerprint(fp string) error {
	if !fingerprintPattern.MatchString(fp) {
		return ErrInvalidFingerprint
	}
	return nil
}

// Decide picks the published key to seal to: the newest, if it is
// signed by the signer given (fingerprint, when not "") or else pinned
// (pin, when not nil); on first use, by any signer, which is then pinned.
// Under a trusted pin, a newest key older than the pinned one (key IDs
// sort by age) is refused: published keys rolled back. where names the
// pins file for errors.
func Decide(published []seal.PublicKey, pin *Pin, fingerprint, where string) (Decision, error) {
	newest, ok := seal.Newest(published)
	if !ok {
		return Decision{}, errors.New("no sealing key is published")
	}
	refused := &RefusedError{KeyID: newest.ID, Signer: signerOf(newest), Where: where}
	if err := newest.Verify(); err != nil {
		refused.Reason = BadSignature
		if errors.Is(err, seal.ErrUnsigned) {
			refused.Reason = Unsigned
		}
		return Decision{}, refused
	}
	d := Decision{Key: newest, Pin: Pin{Fingerprint: refused.Signer, KeyID: newest.ID}}
	switch {
	case fingerprint != "":
		if err := ValidateFingerprint(fingerprint); err != nil {
			return Decision{}, err
		}
		if refused.Signer != fingerprint {
			refused.Reason, refused.Trusted = WrongFingerprint, fingerprint
			return Decision{}, refused
		}
		d.Given = true
		d.Pinned = pin == nil || pin.Fingerprint != fingerprint
	case pin == nil:
		d.Pinned = true
	case pin.Fingerprint != refused.Signer:
		refused.Reason, refused.Trusted = UntrustedSigner, pin.Fingerprint
		return Decision{}, refused
	}
	if pin == nil || d.Pinned || pin.KeyID == newest.ID {
		return d, nil
	}
	if newest.ID < pin.KeyID {
		refused.Reason, refused.Previous = Rollback, pin.KeyID
		return Decision{}, refused
	}
	d.PreviousKeyID = pin.KeyID
	return d, nil
}

func signerOf(k seal.PublicKey) string {
	if len(k.Signer) == 0 {
		return ""
	}
	return seal.Fingerprint(k.Signer)
}

// Describe renders what the CLI tells the user on stderr about a decision
// ("" when nothing changed).
func Describe(d Decision, namespace string) string {
	switch {
	case d.Pinned && d.Given:
		return fmt.Sprintf("pinned the controllers' signing key %s for %s, as given with %s; sealing to key %s",
			d.Pin.Fingerprint, namespace, FlagName, d.Key.ID)
	case d.Pinned:
		return fmt.Sprintf("pinned the controllers' signing key %s for %s (first use): compare it with the fingerprint a controller logs at start; "+
			"sealing to key %s", d.Pin.Fingerprint, namespace, d.Key.ID)
	case d.PreviousKeyID != "":
		return fmt.Sprintf("the controllers' sealing key changed from %s to %s (signed by the trusted signing key %s)",
			d.PreviousKeyID, d.Key.ID, d.Pin.Fingerprint)
	}
	return ""
}
