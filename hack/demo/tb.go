package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// runner lets the demo reuse the test harness (internal/testenv), whose
// helpers take a testing.TB: it runs cleanups at exit and turns a fatal
// error into a message and exit code instead of a test failure. Methods
// the harness does not call fall through to the nil embedded TB and would
// panic, which a harness change would show at once.
type runner struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   bool
}

func (r *runner) Helper()                   {}
func (r *runner) Name() string              { return "flotilla-demo" }
func (r *runner) Failed() bool              { return r.failed }
func (r *runner) Logf(f string, a ...any)   { fmt.Fprintf(os.Stderr, "demo: "+f+"\n", a...) }
func (r *runner) Log(a ...any)              { fmt.Fprintln(os.Stderr, append([]any{"demo:"}, a...)...) }
func (r *runner) Skip(a ...any)             { r.Fatal(a...) }
func (r *runner) Skipf(f string, a ...any)  { r.Fatalf(f, a...) }
func (r *runner) Errorf(f string, a ...any) { r.failed = true; r.Logf(f, a...) }
func (r *runner) Fatal(a ...any)            { r.Fatalf("%s", fmt.Sprint(a...)) }

func (r *runner) Fatalf(f string, a ...any) {
	r.failed = true
	fmt.Fprintf(os.Stderr, "flotilla demo: "+f+"\n", a...)
	r.close()
	os.Exit(1)
}

func (r *runner) Cleanup(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, fn)
}

func (r *runner) TempDir() string {
	dir, err := os.MkdirTemp("", "flotilla-demo-")
	if err != nil {
		r.Fatalf("%v", err)
	}
	r.mu.Lock()
	r.dirs = append(r.dirs, dir)
	r.mu.Unlock()
	return dir
}

// close runs the cleanups, last registered first, then removes temp dirs.
func (r *runner) close() {
	r.mu.Lock()
	fns, dirs := r.cleanups, r.dirs
	r.cleanups, r.dirs = nil, nil
	r.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}
