package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sentinel errors, for errors.Is.
var (
	// ErrNotFound means the store holds no such cluster or secret; the
	// message names it and the store's directory.
	ErrNotFound = errors.New("not found")
	// ErrInvalidName means a name cannot be stored (it must be a DNS-1123
	// label; secret names a DNS-1123 subdomain).
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidKubeconfig means a kubeconfig cannot be parsed or does not
	// describe a usable cluster connection.
	ErrInvalidKubeconfig = errors.New("invalid kubeconfig")
)

// Permissions of what the stores write.
const (
	dirMode  = 0o700
	fileMode = 0o600
)

// writeFileAtomic writes data to dir/name with mode 0600 through a
// temporary file in dir, creating dir (0700) if needed. Messages name the
// file, never the data.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()           // already failed; the first error is reported
			_ = os.Remove(f.Name()) // and the temporary file must not stay
		}
	}()
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// removeFile removes path; a missing file is not an error.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// scrub replaces every secret in msg. Used on messages of errors from
// libraries that were handed secrets, where the original error cannot be
// wrapped without its text.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}
