package sealtrust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Pins is the file the CLI keeps its pins in, one line per Temporal
// namespace: "<address> <namespace> <namespace ID> <fingerprint> <key ID>".
// Lines starting with "#" and lines it does not understand are kept as
// they are.
type Pins struct {
	Path string
}

// DefaultPath is <user config dir>/flotilla/known-seal-keys
// ($XDG_CONFIG_HOME or ~/.config on Linux).
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the file of pinned seal keys: %w; give it with --known-seal-keys", err)
	}
	return filepath.Join(dir, "flotilla", "known-seal-keys"), nil
}

// Target names what a pin is for: the Temporal address, the namespace
// and the namespace's ID, so that a namespace created again (a new
// development server on the same port) is met as new. None may be empty
// or hold white space.
type Target struct {
	Address, Namespace, NamespaceID string
}

func (t Target) fields() []string { return []string{t.Address, t.Namespace, t.NamespaceID} }

func (t Target) String() string { return "Temporal namespace " + t.Namespace + " at " + t.Address }

func (t Target) valid() error {
	for _, f := range t.fields() {
		if f == "" || strings.ContainsAny(f, " \t\r\n") {
			return fmt.Errorf("cannot pin a seal key for %q: empty or white space", strings.Join(t.fields(), " "))
		}
	}
	return nil
}

// Load returns the pin for t; nil when there is none (or no file).
func (p Pins) Load(t Target) (*Pin, error) {
	lines, err := p.lines()
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if pin, ok := parse(l, t); ok {
			return &pin, nil
		}
	}
	return nil, nil
}

// Save records pin for t, replacing t's earlier pin. The file is replaced
// whole (written aside, then renamed), mode 0600.
func (p Pins) Save(t Target, pin Pin) error {
	if err := t.valid(); err != nil {
		return err
	}
	lines, err := p.lines()
	if err != nil {
		return err
	}
	out := []string{"# flotilla: the controllers' seal-key signers this CLI trusts (see flotilla secrets --help)"}
	for _, l := range lines {
		if _, ok := parse(l, t); !ok && !strings.HasPrefix(l, "# flotilla:") && strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	out = append(out, strings.Join(append(t.fields(), pin.Fingerprint, pin.KeyID), " "))
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o700); err != nil {
		return fmt.Errorf("pin the seal key: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.Path), "."+filepath.Base(p.Path)+"-*")
	if err != nil {
		return fmt.Errorf("pin the seal key: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.WriteString(strings.Join(out, "\n") + "\n")
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), p.Path)
	}
	if err != nil {
		return fmt.Errorf("pin the seal key in %s: %w", p.Path, err)
	}
	return nil
}

func (p Pins) lines() ([]string, error) {
	data, err := os.ReadFile(p.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pinned seal keys: %w", err)
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n"), nil
}

// parse reads line as t's pin.
func parse(line string, t Target) (Pin, bool) {
	f := strings.Fields(line)
	if len(f) != 5 || strings.HasPrefix(line, "#") || f[0] != t.Address || f[1] != t.Namespace || f[2] != t.NamespaceID {
		return Pin{}, false
	}
	return Pin{Fingerprint: f[3], KeyID: f[4]}, true
}
