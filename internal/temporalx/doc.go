// Package temporalx holds what every Flotilla process needs to talk to
// Temporal: the connection options shared by the worker and the CLI (address,
// namespace, TLS, mTLS, API key) and the dial that turns them into a client
// with a clear error, the adapter that hands Flotilla's zap logger to the SDK,
// and the names and types of Flotilla's custom search attributes.
//
// It does not import go.temporal.io/server; see package devserver for the
// embedded server.
package temporalx
