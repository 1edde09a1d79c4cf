package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
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
// temporary file in dir (renameio), creating dir (0700) if needed: readers
// see the old file or the new one, never a partial one. Messages name the
// file, never the data.
func writeFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, name)
	if err := renameio.WriteFile(path, data, fileMode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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
