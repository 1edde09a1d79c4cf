package sizelimit

import (
	"errors"
	"io"
	"os"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// ErrTooLarge is what every *Error matches with errors.Is.
var ErrTooLarge = errors.New("too large")

// The flotilla-worker flags that set the limits, named in errors.
const (
	// FileFlag: each repository file read while rendering.
	FileFlag = "max-file-size"
	// CheckoutFlag: the files of one checkout together, and of one bundle.
	CheckoutFlag = "max-checkout-size"
	// ChartFlag: a chart archive as downloaded (compressed), or an OCI
	// manifest or layer.
	ChartFlag = "max-chart-size"
	// ChartUnpackedFlag: a chart archive's files together, decompressed.
	ChartUnpackedFlag = "max-chart-unpacked-size"
	// IndexFlag: a Helm repository's index.yaml.
	IndexFlag = "max-index-size"
)

// Defaults of the repository limits (the chart limits are chartfetch's).
const (
	// DefaultFile bounds one repository file: ten times the 1 MiB that
	// etcd stores in one object (and so the largest manifest an API
	// server accepts) leaves room for multi-document files of large CRDs.
	DefaultFile int64 = 10 << 20
	// DefaultCheckout bounds a checkout: GitOps repositories, Fleet's
	// examples included, hold a few MiB; a quarter GiB fits monorepos
	// and vendored charts while bounding the disk one commit takes.
	DefaultCheckout int64 = 256 << 20
)

// Error reports input larger than its limit.
type Error struct {
	// What names the input: a repository file's path, a URL, an OCI
	// reference; empty when the caller names it around the error.
	What string
	// Limit is the limit in bytes.
	Limit int64
	// Flag is the flotilla-worker flag that raises the limit, without
	// dashes; empty when no flag does.
	Flag string
}

// Error says what is too large, the limit, and how to raise it:
// "<what>: over the limit of 10Mi (raise it with flotilla-worker
// --max-file-size)", without "<what>: " when What is empty.
func (e *Error) Error() string {
	msg := "over the limit of " + Format(e.Limit)
	if e.What != "" {
		msg = e.What + ": " + msg
	}
	if e.Flag != "" {
		msg += " (raise it with flotilla-worker --" + e.Flag + ")"
	}
	return msg
}

// Is reports whether target is ErrTooLarge.
func (e *Error) Is(target error) bool { return target == ErrTooLarge }

// Class is the failure class of content over a limit: Invalid, since the
// content has to change (or the limit be raised) before a retry can work.
func (e *Error) Class() outcome.Class { return outcome.Invalid }

// Format writes n bytes as a Kubernetes binary quantity when it is a
// whole number of KiB, MiB or GiB ("10Mi"), else as a plain number.
func Format(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Limit is a size limit of one kind of input.
type Limit struct {
	// Max is the largest number of bytes allowed. Zero or negative means
	// no limit.
	Max int64
	// Flag is the flotilla-worker flag that sets Max, named in errors.
	Flag string
}

// Error returns the *Error for input what over l.
func (l Limit) Error(what string) *Error {
	return &Error{What: what, Limit: l.Max, Flag: l.Flag}
}

// Check returns l's *Error for what when size, a size declared before
// reading (a Content-Length, a tar header, an OCI descriptor), is over
// l; nil otherwise.
func (l Limit) Check(what string, size int64) error {
	if l.Max > 0 && size > l.Max {
		return l.Error(what)
	}
	return nil
}

// Reader returns a reader of r that fails with l's *Error for what as
// soon as r yields more than l.Max bytes. It never reads more than
// l.Max+1 bytes from r.
func (l Limit) Reader(r io.Reader, what string) io.Reader {
	if l.Max <= 0 {
		return r
	}
	return &reader{r: r, left: l.Max + 1, err: l.Error(what)}
}

// ReadAll reads r to its end, failing with l's *Error for what when r
// holds more than l.Max bytes.
func (l Limit) ReadAll(r io.Reader, what string) ([]byte, error) {
	return io.ReadAll(l.Reader(r, what))
}

// ReadFile reads the file at path, failing with l's *Error for what
// (the path as the user knows it) when it is larger than l.Max. The size
// the file system reports is checked first; the read is bounded as well,
// since the file may grow.
func (l Limit) ReadFile(path, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	if fi, err := f.Stat(); err == nil {
		if err := l.Check(what, fi.Size()); err != nil {
			return nil, err
		}
	}
	return l.ReadAll(f, what)
}

// reader is Limit.Reader's reader: left counts down from Max+1, and the
// byte that would make it reach zero is never handed out.
type reader struct {
	r    io.Reader
	left int64
	err  *Error
}

func (r *reader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, r.err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	if r.left <= 0 {
		// The (Max+1)th byte arrived: the input is over the limit. Hand
		// out only the first Max bytes.
		return n - 1, r.err
	}
	return n, err
}

// Budget is a Limit shared by several reads, such as every file of one
// checkout: each byte read through any of its readers counts against
// it. Its readers may be used concurrently.
type Budget struct {
	Limit
	used atomic.Int64
}

// NewBudget returns a budget of l.
func NewBudget(l Limit) *Budget {
	return &Budget{Limit: l}
}

// Used returns the bytes counted so far.
func (b *Budget) Used() int64 { return b.used.Load() }

// Reader returns a reader of r whose bytes count against b: it fails
// with b's *Error for what (the input that went over) once b is
// exhausted.
func (b *Budget) Reader(r io.Reader, what string) io.Reader {
	if b.Max <= 0 {
		return r
	}
	return &budgetReader{r: r, b: b, what: what}
}

type budgetReader struct {
	r    io.Reader
	b    *Budget
	what string
}

func (r *budgetReader) Read(p []byte) (int, error) {
	left := r.b.Max - r.b.used.Load() + 1
	if left <= 0 {
		return 0, r.b.Error(r.what)
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.r.Read(p)
	if used := r.b.used.Add(int64(n)); used > r.b.Max {
		return max(n-int(used-r.b.Max), 0), r.b.Error(r.what)
	}
	return n, err
}
