// Package devserver runs a complete single-node Temporal server inside the
// Flotilla worker process: frontend, history, matching and worker services on
// loopback, persisted to one SQLite file, with the Temporal Web UI beside it.
//
// It exists so that `flotilla-worker --dev` and the test suite need nothing
// installed: no Temporal CLI, no Docker, no database server. The state file
// lives in Options.StateDir; workflow history survives a kill -9 of the
// process and a restart on the same file.
//
// This is the only package in Flotilla that imports go.temporal.io/server.
// The server is large (hundreds of MB linked): keep imports of this package to
// the worker's --dev path and to the tests that need a real server, so other
// binaries and test binaries stay small and link fast.
package devserver
