// Package buildinfo reports the version of the running Flotilla binary. The
// Makefile stamps Version and Commit with -ldflags -X; a plain `go build`
// falls back to the module version recorded by the Go toolchain.
package buildinfo
