package temporalx_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func TestClientOptions_Validate(t *testing.T) {
	tests := []struct {
		name    string
		opts    temporalx.ClientOptions
		wantErr string
	}{
		{name: "defaults", opts: temporalx.ClientOptions{}},
		{name: "cert without key", opts: temporalx.ClientOptions{TLSCertFile: "c"}, wantErr: "--tls-cert and --tls-key must be given together"},
		{name: "both api key sources", opts: temporalx.ClientOptions{APIKey: "k", APIKeyFile: "f"}, wantErr: "mutually exclusive"},
		{name: "require encryption without keys", opts: temporalx.ClientOptions{RequireEncryption: true},
			wantErr: "--require-encryption needs --payload-keys"},
		{name: "require encryption with keys", opts: temporalx.ClientOptions{RequireEncryption: true, PayloadKeys: "dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestClientOptions_ClientConfig(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("s3cret\n"), 0o600))
	badCA := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(badCA, []byte("not pem"), 0o600))

	cfg, err := temporalx.ClientOptions{Address: "h:1", APIKeyFile: keyFile, TLS: true}.ClientConfig(nil)
	require.NoError(t, err)
	assert.Equal(t, "h:1", cfg.HostPort)
	assert.Equal(t, "default", cfg.Namespace)
	assert.NotNil(t, cfg.Credentials)
	assert.NotNil(t, cfg.ConnectionOptions.TLS)

	cfg, err = temporalx.ClientOptions{}.ClientConfig(nil)
	require.NoError(t, err)
	assert.Nil(t, cfg.ConnectionOptions.TLS, "plaintext unless asked")

	_, err = temporalx.ClientOptions{TLSCAFile: badCA}.ClientConfig(nil)
	require.ErrorContains(t, err, "holds no PEM certificate")
}

func TestClientOptions_DialUnreachableNamesAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // now nothing listens there

	start := time.Now()
	_, err = temporalx.ClientOptions{Address: addr, DialTimeout: 5 * time.Second}.Dial(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("temporal server at %s is unreachable", addr))
	assert.Less(t, time.Since(start), 5*time.Second, "a refused connection fails at once")
}
