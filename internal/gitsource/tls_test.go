package gitsource

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestTLS: an https server signed by a private CA is reached with the CA
// in CABundle (ls-remote and fetch) or with InsecureSkipTLSVerify; without
// either, both fail with ErrTLS, whose message points at caBundle.
func TestTLS(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{TLS: true})
	repo := srv.CreateRepo(t, "tls", map[string]string{"a.yaml": "a: 1\n"})
	tests := []struct {
		name    string
		remote  Remote
		wantErr error
	}{
		{"caBundle", Remote{URL: repo.URL(), CABundle: srv.CAPEM()}, nil},
		{"insecureSkipTLSVerify", Remote{URL: repo.URL(), InsecureSkipTLSVerify: true}, nil},
		{"untrusted", Remote{URL: repo.URL()}, ErrTLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := Resolve(t.Context(), tt.remote, "", "")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.True(t, UntrustedCertificate(err))
				assert.Contains(t, err.Error(), "set caBundle")
				_, _, err = NewCache(t.TempDir()).Checkout(t.Context(), tt.remote, Ref{Name: "refs/heads/master", Commit: repo.Head(t)})
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, repo.Head(t), ref.Commit)
			dir, _, err := NewCache(t.TempDir()).Checkout(t.Context(), tt.remote, ref)
			require.NoError(t, err)
			assert.FileExists(t, dir+"/a.yaml")
		})
	}
}
