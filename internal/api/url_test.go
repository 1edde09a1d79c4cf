package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"https://user:" + "s3cr3t-Pa55" + "@github.com/org/repo", "https://github.com/org/repo"},
		{"http://token@127.0.0.1:8080/r.git", "http://127.0.0.1:8080/r.git"},
		{"https://u:p@ss@host/x", "https://host/x"},                    // '@' inside the password
		{"https://u:pa ss%zz@host/x", "https://host/x"},                // does not parse as a URL
		{"https://host/path/with@sign", "https://host/path/with@sign"}, // '@' after the host is not userinfo
		{"https://host?q=a@b", "https://host?q=a@b"},
		{"user:" + "s3cr3t-Pa55" + "@host:org/repo", "host:org/repo"},
		{"git@github.com:org/repo.git", "github.com:org/repo.git"}, // scp-like stays scp-like
		{"git@github.com:repo.git", "github.com:repo.git"},
		{"ssh://git@127.0.0.1:2222/srv/app.git", "ssh://127.0.0.1:2222/srv/app.git"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, api.RedactURL(tt.in))
		})
	}
}

func TestIsSSHURL(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"git@github.com:org/repo.git", true},
		{"github.com:org/repo.git", true},
		{"ssh://git@github.com:2222/org/repo.git", true},
		{"git+ssh://git@github.com/org/repo.git", true},
		{"ssh+git://github.com/org/repo.git", true},
		{"https://github.com/org/repo.git", false},
		{"git://github.com/org/repo.git", false},
		{"./local:path", false},
		{"/abs/repo.git", false},
		{"", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, api.IsSSHURL(tt.in), tt.in)
	}
}
