package logging_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/flotilla-gitops/flotilla/internal/logging"
)

func TestOptions_New(t *testing.T) {
	tests := []struct {
		name    string
		opts    logging.Options
		level   zapcore.Level
		wantErr string
	}{
		{name: "defaults", opts: logging.Options{}, level: zapcore.InfoLevel},
		{name: "json debug", opts: logging.Options{Level: "debug", Format: "json"}, level: zapcore.DebugLevel},
		{name: "console warn", opts: logging.Options{Level: "warn", Format: "console"}, level: zapcore.WarnLevel},
		{name: "bad level", opts: logging.Options{Level: "loud"}, wantErr: `invalid --log-level "loud"`},
		{name: "bad format", opts: logging.Options{Format: "xml"}, wantErr: `invalid --log-format "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.opts.New()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.level, l.Level())
		})
	}
}
