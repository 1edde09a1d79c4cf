package bundle

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// Limits bound what one Read takes from a repository, which is not
// trusted: a file over a limit is refused while it is read, never read
// whole first.
type Limits struct {
	// File bounds each file: fleet.yaml, values files, .fleetignore and
	// every file of the manifest. Optional: default sizelimit.DefaultFile.
	File int64
	// Bundle bounds the files one Read reads together (a bundle's
	// manifest holds its subdirectories' bundles too, and a file linked
	// twice is read twice). Optional: default sizelimit.DefaultCheckout,
	// since no bundle can be larger than its checkout; the worker sets
	// it with --max-checkout-size.
	Bundle int64
}

// files returns the file reader of one Read.
func (l Limits) files() *fileReader {
	file, total := l.File, l.Bundle
	if file <= 0 {
		file = sizelimit.DefaultFile
	}
	if total <= 0 {
		total = sizelimit.DefaultCheckout
	}
	return &fileReader{
		file:  sizelimit.Limit{Max: file, Flag: sizelimit.FileFlag},
		total: sizelimit.NewBudget(sizelimit.Limit{Max: total, Flag: sizelimit.CheckoutFlag}),
	}
}

// fileReader reads repository files within a Read's limits.
type fileReader struct {
	file  sizelimit.Limit
	total *sizelimit.Budget
}

// read reads the file at abs. A file over the limit is a
// *sizelimit.Error without a name (callers name the file in a
// ValidationError); the bundle's budget running out names the bundle's
// files.
func (f *fileReader) read(abs string) ([]byte, error) {
	fh, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }() // read-only
	if fi, err := fh.Stat(); err == nil {
		if err := f.file.Check("", fi.Size()); err != nil {
			return nil, err
		}
	}
	r := f.total.Reader(f.file.Reader(fh, ""), "the bundle's files together")
	return io.ReadAll(r)
}

// readFile reads the repository file rel. A file over a limit is a
// *ValidationError naming the bundle and the file.
func (rd *reader) readFile(rel string) ([]byte, error) {
	data, err := rd.files.read(rd.repo.abs(rel))
	var tooLarge *sizelimit.Error
	switch {
	case errors.As(err, &tooLarge):
		return nil, &ValidationError{Bundle: rd.name, Path: rel, Err: tooLarge}
	case err != nil:
		return nil, fmt.Errorf("bundle %s: read %s: %w", rd.name, rel, err)
	}
	return data, nil
}
