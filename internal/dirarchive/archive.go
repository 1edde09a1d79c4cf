// Package dirarchive packs a local directory into a gzipped tar and
// unpacks one safely: bounded in size, regular files and directories
// only, no absolute paths, no entry outside the destination. `flotilla
// plan --path DIR` sends a directory this way to be rendered in place of
// a GitRepo's tree.
package dirarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound an archive.
const (
	// MaxCompressed is the most an archive may weigh: it travels through
	// Temporal's history (base64 in JSON, under its 2 MiB payload limit).
	MaxCompressed = 1 << 20
	// MaxUnpacked is the most its files may weigh together.
	MaxUnpacked = 20 << 20
)

// ErrTooLarge is returned for an archive over MaxCompressed or
// MaxUnpacked.
var ErrTooLarge = errors.New("archive too large")

// EntryError names an entry of an archive that is refused.
type EntryError struct {
	Name   string
	Reason string
}

func (e *EntryError) Error() string { return fmt.Sprintf("archive entry %q: %s", e.Name, e.Reason) }

// skipDirs are not packed: they are no part of what is rendered.
var skipDirs = map[string]bool{".git": true}

// Pack returns dir's regular files and directories as a gzipped tar
// (paths relative to dir, "/"-separated), refusing symlinks and anything
// over the limits.
func Pack(dir string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.IsDir() && skipDirs[d.Name()]:
			return filepath.SkipDir
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755})
		case !d.Type().IsRegular():
			return &EntryError{Name: name, Reason: "not a regular file or directory (symlinks are not packed)"}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > MaxUnpacked {
			return fmt.Errorf("%s: files over %d MiB: %w", dir, MaxUnpacked>>20, ErrTooLarge)
		}
		return packFile(tw, p, name, info.Size())
	})
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if buf.Len() > MaxCompressed {
		return nil, fmt.Errorf("pack %s: %d bytes compressed, over %d KiB: %w", dir, buf.Len(), MaxCompressed>>10, ErrTooLarge)
	}
	return buf.Bytes(), nil
}

func packFile(tw *tar.Writer, p, name string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, size)
	return err
}

// Unpack writes the archive data into dest (which must exist). It
// refuses, naming the entry, absolute paths, paths leaving dest, and
// anything but regular files and directories; and returns ErrTooLarge
// for data over MaxCompressed or files over MaxUnpacked in total.
func Unpack(data []byte, dest string) error {
	if len(data) > MaxCompressed {
		return fmt.Errorf("%d bytes compressed, over %d KiB: %w", len(data), MaxCompressed>>10, ErrTooLarge)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	tr := tar.NewReader(gz)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		target, err := entryPath(dest, h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			if total += h.Size; total > MaxUnpacked {
				return fmt.Errorf("files over %d MiB: %w", MaxUnpacked>>20, ErrTooLarge)
			}
			err = writeFile(target, tr, h.Size)
		default:
			return &EntryError{Name: h.Name, Reason: "not a regular file or directory"}
		}
		if err != nil {
			return fmt.Errorf("unpack %q: %w", h.Name, err)
		}
	}
}

// entryPath is where entry name goes under dest.
func entryPath(dest, name string) (string, error) {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) || strings.Contains(name, `\`) {
		return "", &EntryError{Name: name, Reason: "absolute path"}
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", &EntryError{Name: name, Reason: "path leaves the archive's directory"}
	}
	return filepath.Join(dest, filepath.FromSlash(clean)), nil
}

func writeFile(target string, r io.Reader, size int64) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		_ = f.Close() // the copy's error is the one to report
		return err
	}
	return f.Close()
}
