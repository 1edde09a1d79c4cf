// Package devtemporal starts a real Temporal server for a test: the same
// embedded server `flotilla-worker --dev` runs (package devserver), on free
// loopback ports with its SQLite file in the test's temp dir, stopped in
// t.Cleanup.
//
// It lives apart from package testenv because it links the Temporal server:
// only test binaries that need a server should pay for that.
package devtemporal
