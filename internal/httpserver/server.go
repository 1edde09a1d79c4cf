package httpserver

import (
	"fmt"
	"net/http"
	"time"
)

// MaxHeaderBytes bounds a request's headers on every server New builds.
const MaxHeaderBytes = 64 << 10

// Timeouts bound one connection of a server. Every field is required:
// New refuses a zero or negative one.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included, from the
	// moment the connection is accepted or the previous request ended.
	Read time.Duration
	// Write bounds handling a request and writing its response, from the
	// end of its headers: the longest any handler may run. A handler that
	// streams for longer (pprof's profile, 30 s by default) needs a
	// longer one.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
}

// TimeoutError is a Timeouts field that is not set.
type TimeoutError struct {
	// Field is the Timeouts field: "ReadHeader", "Read", "Write" or
	// "Idle".
	Field string
	// Value is what it was set to.
	Value time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("http server: the %s timeout must be positive, not %s", e.Field, e.Value)
}

// Validate returns a *TimeoutError for the first field that is not
// positive.
func (t Timeouts) Validate() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"ReadHeader", t.ReadHeader}, {"Read", t.Read}, {"Write", t.Write}, {"Idle", t.Idle}} {
		if f.v <= 0 {
			return &TimeoutError{Field: f.name, Value: f.v}
		}
	}
	return nil
}

// New returns a server of h with the timeouts t and headers of at most
// MaxHeaderBytes. It does not listen: the caller serves it on its
// listener. It fails if any of t is not set.
func New(h http.Handler, t Timeouts) (*http.Server, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes,
	}, nil
}
