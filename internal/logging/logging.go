package logging

import (
	"fmt"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Options configure the process logger.
type Options struct {
	// Level is debug, info, warn or error. Optional: default info.
	Level string
	// Format is json (one object per line, for log shippers) or console
	// (for people). Optional: default json.
	Format string
}

// BindFlags registers --log-level and --log-format on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", "json", "log format: json or console")
}

// New builds the logger. It writes to stderr.
func (o Options) New() (*zap.Logger, error) {
	level := o.Level
	if level == "" {
		level = "info"
	}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", o.Level)
	}
	var cfg zap.Config
	switch o.Format {
	case "", "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.TimeKey = "ts"
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		cfg.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("invalid --log-format %q: want json or console", o.Format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil // every "Deployed bundle" line counts; never sample
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	logger, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return logger, nil
}
