package gitsource

import (
	"fmt"
	"testing"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secret = "s3cr3t-Pa55"

func TestStringsHideSecrets(t *testing.T) {
	auth := &Auth{Username: "alice", Password: secret}
	r := Remote{URL: "https://bob:" + secret + "@git.example.com/r.git", Auth: auth, CABundle: []byte("pem")}
	for _, s := range []string{
		auth.String(), fmt.Sprint(auth), fmt.Sprintf("%v %+v %#v %s", *auth, *auth, *auth, auth),
		r.String(), fmt.Sprint(r), fmt.Sprintf("%v %+v %#v %s", r, r, r, &r),
	} {
		assert.NotContains(t, s, secret)
		assert.NotContains(t, s, "bob")
	}
	assert.Contains(t, auth.String(), "alice")
	assert.Equal(t, "https://git.example.com/r.git", r.String())
}

func TestEndpoint(t *testing.T) {
	tests := []struct {
		name     string
		remote   Remote
		wantURL  string
		wantAuth *githttp.BasicAuth
		wantErr  error
	}{
		{
			name:    "anonymous",
			remote:  Remote{URL: "https://host/r.git"},
			wantURL: "https://host/r.git",
		},
		{
			name:     "userinfo becomes auth",
			remote:   Remote{URL: "https://alice:" + secret + "@host/r.git"},
			wantURL:  "https://host/r.git",
			wantAuth: &githttp.BasicAuth{Username: "alice", Password: secret},
		},
		{
			name:     "explicit auth wins over userinfo",
			remote:   Remote{URL: "https://alice:x@host/r.git", Auth: &Auth{Username: "bob", Password: secret}},
			wantURL:  "https://host/r.git",
			wantAuth: &githttp.BasicAuth{Username: "bob", Password: secret},
		},
		{
			name:    "unparsable URL",
			remote:  Remote{URL: "https://alice:" + secret + "%zz@host/r.git"},
			wantErr: ErrInvalidURL,
		},
		{
			name:    "git:// is not supported (ssh is: TestSSHEndpoint)",
			remote:  Remote{URL: "git://host/r.git"},
			wantErr: ErrInvalidURL,
		},
		{
			name:    "no host",
			remote:  Remote{URL: "/local/path"},
			wantErr: ErrInvalidURL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, err := tt.remote.endpoint()
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), secret)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantURL, ep.url)
			if tt.wantAuth == nil {
				assert.Nil(t, ep.auth)
			} else {
				assert.Equal(t, tt.wantAuth, ep.auth)
			}
		})
	}
}
