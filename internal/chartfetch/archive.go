package chartfetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
	"helm.sh/helm/v3/pkg/chart/loader"
)

const (
	// DefaultMaxArchiveSize is the largest compressed chart archive (or
	// OCI manifest or layer) fetched unless Fetcher.MaxArchiveSize says
	// otherwise. The largest charts published (kube-prometheus-stack,
	// with its CRDs) are under 1 MiB compressed.
	DefaultMaxArchiveSize int64 = 20 << 20
	// DefaultMaxUnpackedSize is the largest total size of a chart's files
	// unless Fetcher.MaxUnpackedSize says otherwise. It is Helm's own
	// limit (loader.MaxDecompressedChartSize), which applies after it.
	DefaultMaxUnpackedSize int64 = 100 << 20
	// DefaultMaxIndexSize bounds a repository's index.yaml unless
	// Fetcher.MaxIndexSize says otherwise: large public repositories
	// publish indexes of tens of MiB (Bitnami's was over 20 MiB before
	// it was trimmed).
	DefaultMaxIndexSize int64 = 64 << 20
)

// tooLarge reports content over a limit: a *sizelimit.Error that is also
// ErrInvalidArchive.
func tooLarge(err error) error {
	return fmt.Errorf("%w: %w", ErrInvalidArchive, err)
}

// Chart is a fetched chart.
type Chart struct {
	// Name and Version are those of the archive's Chart.yaml.
	Name, Version string
	// Digest is "sha256:<hex>" of the archive.
	Digest string
	// Files are the archive's contents, sorted by name, with the archive's
	// top directory kept ("guestbook/Chart.yaml").
	Files []File
}

// digestOf returns "sha256:<hex>" of data.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hexOf returns the hex part of a "sha256:<hex>" digest.
func hexOf(digest string) string {
	return strings.TrimPrefix(digest, "sha256:")
}

// isGzip reports whether data starts with the gzip magic number.
func isGzip(data []byte) bool {
	return len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b
}

// loadChart unpacks a chart archive and reads its Chart.yaml.
func loadChart(data []byte, maxUnpacked int64) (*Chart, error) {
	files, err := untar(data, maxUnpacked)
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArchive, err)
	}
	return &Chart{
		Name:    ch.Metadata.Name,
		Version: ch.Metadata.Version,
		Digest:  digestOf(data),
		Files:   files,
	}, nil
}

// untar returns the regular files of a gzip-compressed tar archive, sorted
// by name, byte for byte. It rejects absolute paths, paths with "..",
// links and devices, duplicate names, and archives that unpack to more than
// maxUnpacked bytes: a file's declared size is checked before it is read,
// files are counted while they are read, and the decompressed stream as a
// whole (headers and padding too) stops at twice maxUnpacked plus 1 MiB,
// so a gzip bomb costs neither memory nor much time. Over a limit is a
// *sizelimit.Error wrapped as ErrInvalidArchive.
func untar(data []byte, maxUnpacked int64) ([]File, error) {
	if !isGzip(data) {
		return nil, fmt.Errorf("%w: not gzip-compressed", ErrInvalidArchive)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArchive, err)
	}
	defer gz.Close()
	limit := sizelimit.Limit{Max: maxUnpacked, Flag: sizelimit.ChartUnpackedFlag}
	stream := sizelimit.Limit{Max: 2*maxUnpacked + 1<<20}
	var tooBig *sizelimit.Error
	tr := tar.NewReader(stream.Reader(gz, ""))
	remaining := maxUnpacked
	seen := map[string]bool{}
	var files []File
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.As(err, &tooBig) {
			return nil, tooLarge(limit.Error("the archive, decompressed"))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidArchive, err)
		}
		name, ok, err := regularEntry(hdr, seen)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		b, err := readEntry(tr, hdr, name, remaining, limit)
		if err != nil {
			return nil, err
		}
		remaining -= int64(len(b))
		files = append(files, File{Name: name, Data: b})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: archive holds no files", ErrInvalidArchive)
	}
	sortFiles(files)
	return files, nil
}

// readEntry reads the file name of hdr, the tar reader's current entry,
// when it fits in remaining of limit's bytes: its declared size is
// checked first, then what it holds.
func readEntry(tr io.Reader, hdr *tar.Header, name string, remaining int64, limit sizelimit.Limit) ([]byte, error) {
	over := tooLarge(limit.Error("the chart's files together, up to " + name))
	if hdr.Size > remaining {
		return nil, over
	}
	b, err := io.ReadAll(io.LimitReader(tr, remaining+1))
	var tooBig *sizelimit.Error
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(limit.Error("the archive, decompressed"))
	case err != nil:
		return nil, fmt.Errorf("%w: reading %q: %w", ErrInvalidArchive, name, err)
	case int64(len(b)) > remaining:
		return nil, over
	}
	return b, nil
}

// regularEntry returns the cleaned name of a regular file's entry and
// records it in seen; ok is false for entries untar skips (directories and
// global headers). It rejects other entry types, unsafe paths and names
// already in seen.
func regularEntry(hdr *tar.Header, seen map[string]bool) (name string, ok bool, err error) {
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeXGlobalHeader:
		return "", false, nil
	case tar.TypeReg:
	default:
		return "", false, fmt.Errorf("%w: entry %q is not a regular file (type %q)", ErrInvalidArchive, hdr.Name, hdr.Typeflag)
	}
	name, err = cleanArchivePath(hdr.Name)
	if err != nil {
		return "", false, err
	}
	if seen[name] {
		return "", false, fmt.Errorf("%w: duplicate entry %q", ErrInvalidArchive, name)
	}
	seen[name] = true
	return name, true, nil
}

// cleanArchivePath checks and normalises an archive entry name.
func cleanArchivePath(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: unsafe path %q", ErrInvalidArchive, name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: unsafe path %q", ErrInvalidArchive, name)
		}
	}
	clean := path.Clean(name)
	if clean == "." || clean == "" {
		return "", fmt.Errorf("%w: unsafe path %q", ErrInvalidArchive, name)
	}
	return clean, nil
}

// sortFiles sorts files by name.
func sortFiles(files []File) {
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
}

// packChart writes files (named relative to the chart root) as a
// gzip-compressed tar archive under the top directory dir. The output
// depends only on the inputs: entries are sorted and carry a fixed time and
// mode, so the same files always give the same bytes.
func packChart(dir string, files []File) ([]byte, error) {
	sorted := append([]File(nil), files...)
	sortFiles(sorted)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0).UTC()
	for _, f := range sorted {
		name, err := cleanArchivePath(f.Name)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     dir + "/" + name,
			Mode:     0o644,
			Size:     int64(len(f.Data)),
			ModTime:  epoch,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
