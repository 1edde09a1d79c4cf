// Package httpserver builds every HTTP server Flotilla runs (the health,
// metrics, profiling and payload codec server of --http-listen, and the
// webhook receiver) with read, write and idle timeouts, so that no
// server can be built without them: a client that sends its headers or
// body slowly, never reads its response, or keeps an idle connection open
// holds a connection for a bounded time only.
package httpserver
