package devserver

import (
	"errors"
	"fmt"
	"net"

	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
)

// Default values for Options.
const (
	DefaultStateDir   = ".flotilla"
	DefaultListen     = "127.0.0.1:7233"
	DefaultUIListen   = "127.0.0.1:8233"
	DefaultNamespace  = "default"
	databaseFileName  = "temporal.db"
	defaultRetentionH = 72
)

// Options configures a dev server. The zero value is not usable; call
// ApplyDefaults first (Start does).
type Options struct {
	// StateDir holds the SQLite database. It is created if missing.
	// Optional: default ".flotilla".
	StateDir string
	// Listen is the host:port of the frontend gRPC service that clients and
	// workers dial. Port 0 picks a free port. Optional: default 127.0.0.1:7233.
	Listen string
	// UIListen is the host:port of the Web UI. Empty disables the UI.
	UIListen string
	// Namespace is registered, with Flotilla's search attributes, on every start.
	// Optional: default "default".
	Namespace string
	// SearchAttributes are the custom search attributes registered when the
	// namespace is created and ensured on every start.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's own logs (at warn level and above unless
	// ServerLogLevel says otherwise). Optional: default zap.NewNop().
	Logger *zap.Logger
	// CodecEndpoint is the URL of a payload codec endpoint (POST
	// CodecEndpoint+"/decode") that the Web UI, from the browser, decodes
	// payloads with; the UI sends no credentials to it. Optional: default
	// none (the UI shows payloads as stored).
	CodecEndpoint string
	// ServerLogLevel filters the Temporal server's internal logs, which are
	// verbose at info. Optional: default "warn".
	ServerLogLevel string
}

// ApplyDefaults fills unset fields with their documented defaults.
func (o *Options) ApplyDefaults() {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.ServerLogLevel == "" {
		o.ServerLogLevel = "warn"
	}
}

// Validate reports the first problem with the options, naming the field.
func (o Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return fmt.Errorf("invalid listen address %q: %w", o.Listen, err)
	}
	if o.UIListen != "" {
		if _, _, err := net.SplitHostPort(o.UIListen); err != nil {
			return fmt.Errorf("invalid UI listen address %q: %w", o.UIListen, err)
		}
	}
	return checkSearchAttributeBudget(o.SearchAttributes)
}

// sqliteLimit is how many custom search attributes of type t SQLite
// visibility allows per namespace.
func sqliteLimit(t enumspb.IndexedValueType) int {
	if t == enumspb.INDEXED_VALUE_TYPE_KEYWORD {
		return 10
	}
	return 3
}

func checkSearchAttributeBudget(attrs map[string]enumspb.IndexedValueType) error {
	used := map[enumspb.IndexedValueType]int{}
	for _, t := range attrs {
		used[t]++
	}
	var errs []error
	for t, n := range used {
		if n > sqliteLimit(t) {
			errs = append(errs, fmt.Errorf("%d custom search attributes of type %s, SQLite allows %d", n, t, sqliteLimit(t)))
		}
	}
	return errors.Join(errs...)
}
