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
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, api.RedactURL(tt.in))
		})
	}
}
