package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// fuzzOpener holds two fixed keys, fk-1 and fk-2, so that seeds sealed to
// them open in every run.
func fuzzOpener(f *testing.F) *Opener {
	f.Helper()
	var keys []keyring.Key
	for i, id := range []string{"fk-1", "fk-2"} {
		var k keyring.Key
		k.ID = id
		for j := range k.Bytes {
			k.Bytes[j] = byte(31*i + j + 1)
		}
		keys = append(keys, k)
	}
	r, err := keyring.New(keys...)
	if err != nil {
		f.Fatal(err)
	}
	o, err := NewOpener(r)
	if err != nil {
		f.Fatal(err)
	}
	return o
}

// FuzzOpen: no Box makes Open, Reseal or MAC panic; a Box that does not
// open fails with ErrUnknownKey or ErrCorrupt, and its error never holds
// the box's data; one that opens was sealed to a key of the ring, and
// Reseal moves it to the newest key with the same content.
func FuzzOpen(f *testing.F) {
	o := fuzzOpener(f)
	for _, p := range o.PublicKeys() {
		for _, plain := range []string{"", "password", "apiVersion: v1\nkind: Config\n", strings.Repeat("x", 300)} {
			b, err := Seal(p, []byte(plain))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b.KeyID, b.Data)
			f.Add(b.KeyID, b.Data[:len(b.Data)-1])
			f.Add(b.KeyID, b.Data[:box32+16])
			flipped := bytes.Clone(b.Data)
			flipped[len(flipped)/2] ^= 1
			f.Add(b.KeyID, flipped)
			f.Add("fk-3", b.Data)
		}
	}
	f.Add("", []byte(nil))
	f.Add("fk-1", []byte{})
	f.Add("fk-1", make([]byte, box32))
	f.Fuzz(func(t *testing.T, keyID string, data []byte) {
		b := Box{KeyID: keyID, Data: data}
		plain, err := o.Open(b)
		if err != nil {
			checkOpenError(t, o, err, b)
			if _, _, rerr := o.Reseal(b); rerr != nil {
				checkOpenError(t, o, rerr, b)
			}
			return
		}
		if keyID != "fk-1" && keyID != "fk-2" {
			t.Fatalf("opened a box naming key %q, which the ring does not hold", keyID)
		}
		out, changed, err := o.Reseal(b)
		if err != nil {
			t.Fatalf("Reseal of a box that opens: %v", err)
		}
		if out.KeyID != o.Newest().ID || changed != (keyID != o.Newest().ID) {
			t.Fatalf("Reseal from %s gave key %s, changed %v", keyID, out.KeyID, changed)
		}
		again, err := o.Open(out)
		if err != nil || !bytes.Equal(again, plain) {
			t.Fatalf("resealed box opens to %q, %v; want %q", again, err, plain)
		}
	})
}

// box32 is the size of the ephemeral public key a box starts with.
const box32 = 32

// checkOpenError holds an error of opening b to its contract: classed by
// one of the package's sentinels, and saying nothing about b's data (a box
// naming the same key with other data fails with the same message).
func checkOpenError(t *testing.T, o *Opener, err error, b Box) {
	t.Helper()
	if !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v is neither ErrUnknownKey nor ErrCorrupt", err)
	}
	_, other := o.Open(Box{KeyID: b.KeyID, Data: []byte("other data")})
	if other == nil || other.Error() != err.Error() {
		t.Fatalf("error %q depends on the box's data (other data: %v)", err, other)
	}
}

// FuzzSealOpen: whatever the plaintext, a sealed box opens to it with the
// key it names, never holds it in the clear, and stops opening when any
// byte changes.
func FuzzSealOpen(f *testing.F) {
	o := fuzzOpener(f)
	for _, s := range []string{"", "x", "password", "apiVersion: v1\nkind: Config\nclusters: []\n", strings.Repeat("secret", 100)} {
		f.Add([]byte(s), uint16(0), false)
		f.Add([]byte(s), uint16(7), true)
	}
	f.Fuzz(func(t *testing.T, plain []byte, at uint16, oldKey bool) {
		p := o.Newest()
		if oldKey {
			p = o.PublicKeys()[0]
		}
		b, err := Seal(p, plain)
		if err != nil {
			t.Fatal(err)
		}
		if b.KeyID != p.ID {
			t.Fatalf("sealed to %s, box names %s", p.ID, b.KeyID)
		}
		if len(plain) >= 8 && bytes.Contains(b.Data, plain) {
			t.Fatalf("box holds the plaintext in the clear")
		}
		got, err := o.Open(b)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Open = %q, %v; want %q", got, err, plain)
		}
		altered := Box{KeyID: b.KeyID, Data: bytes.Clone(b.Data)}
		altered.Data[int(at)%len(altered.Data)] ^= 0x80
		if _, err := o.Open(altered); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("altered box: error %v, want ErrCorrupt", err)
		}
	})
}

// FuzzParsePublicKey: what ParsePublicKey accepts is a valid key whose
// String form parses back to the same key.
func FuzzParsePublicKey(f *testing.F) {
	o := fuzzOpener(f)
	for _, p := range o.PublicKeys() {
		s := p.String()
		f.Add(s)
		f.Add(" " + s + "\n")
		f.Add(s[:len(s)-2])
		f.Add(strings.ToUpper(s))
		f.Add(strings.Replace(s, ":", "::", 1))
	}
	f.Add("")
	f.Add(":")
	f.Add("fk-1:")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePublicKey(s)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted %q, which does not validate: %v", s, err)
		}
		again, err := ParsePublicKey(p.String())
		if err != nil || again.ID != p.ID || !bytes.Equal(again.Key, p.Key) {
			t.Fatalf("%q: String %q parses to %+v, %v", s, p.String(), again, err)
		}
	})
}
