// Package sizelimit bounds how many bytes of untrusted input Flotilla
// reads: repository files, checkouts, Helm repository indexes and chart
// archives. A Limit is checked while reading (a reader that stops one byte
// past the limit), never by reading everything and measuring afterwards,
// so input larger than the limit costs at most the limit in memory.
//
// Going over a limit is an *Error: it names what was read, the limit and
// the flotilla-worker flag that raises it. It is the repository's or the
// chart server's content at fault, so callers class it outcome.Invalid
// (Error.Class): retrying cannot help until the content or the limit
// changes.
package sizelimit
