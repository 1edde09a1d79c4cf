package webhook

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRepoKey_SameRepositorySameKey(t *testing.T) {
	groups := map[string][]string{
		"github.com/rancher/fleet-examples": {
			"https://github.com/rancher/fleet-examples",
			"https://github.com/rancher/fleet-examples.git",
			"https://github.com/rancher/fleet-examples/",
			"HTTPS://GitHub.com/Rancher/Fleet-Examples.git",
			"http://github.com:80/rancher/fleet-examples",
			"https://user:token@github.com:443/rancher/fleet-examples.git",
			"ssh://git@github.com/rancher/fleet-examples.git",
			"ssh://git@github.com:22/rancher/fleet-examples.git",
			"git@github.com:rancher/fleet-examples.git",
			"git@github.com:/rancher/fleet-examples",
			"github.com:rancher/fleet-examples",
			"git://github.com/rancher/fleet-examples.git",
		},
		"gitlab.example.com/group/sub/app": {
			"https://gitlab.example.com/group/sub/app.git",
			"ssh://git@gitlab.example.com:2222/group/sub/app.git",
			"git@gitlab.example.com:group/sub/app.git",
		},
		"bitbucket.example.com/proj/repo": {
			"https://bitbucket.example.com/scm/proj/repo.git",
			"ssh://git@bitbucket.example.com:7999/proj/repo.git",
		},
		"dev.azure.com/org/project/repo": {
			"https://dev.azure.com/org/project/_git/repo",
			"https://org@dev.azure.com/org/project/_git/repo",
			"git@ssh.dev.azure.com:v3/org/project/repo",
			"ssh://git@ssh.dev.azure.com/v3/org/project/repo",
			"https://org.visualstudio.com/project/_git/repo",
			"https://org.visualstudio.com/DefaultCollection/project/_git/repo",
			"org@vs-ssh.visualstudio.com:v3/org/project/repo",
		},
		"127.0.0.1/app": {
			"http://127.0.0.1:34877/app.git",
			"http://127.0.0.1:9000/app",
		},
		"[::1]/app": {
			"http://[::1]:8080/app.git",
			"ssh://git@[0:0::1]:22/app",
		},
	}
	for want, urls := range groups {
		for _, u := range urls {
			got, err := RepoKey(u)
			require.NoError(t, err, u)
			assert.Equal(t, want, got, u)
		}
	}
}

func TestRepoKey_DifferentRepositoriesDiffer(t *testing.T) {
	pairs := [][2]string{
		{"https://github.com/org/app", "https://github.com/org/app2"},
		{"https://github.com/org/app", "https://gitlab.com/org/app"},
		{"https://github.com/org/app", "https://github.com/other/app"},
		{"https://gitlab.com/a/b/c", "https://gitlab.com/a/c"},
		{"https://dev.azure.com/org/p1/_git/repo", "https://dev.azure.com/org/p2/_git/repo"},
	}
	for _, p := range pairs {
		a, err := RepoKey(p[0])
		require.NoError(t, err)
		b, err := RepoKey(p[1])
		require.NoError(t, err)
		assert.NotEqual(t, a, b, "%s vs %s", p[0], p[1])
	}
}

func TestRepoKey_RejectsNonURLs(t *testing.T) {
	for _, s := range []string{"", "  ", "app", "/local/path/repo", "./repo", "https://", "https:///path", "git@github.com:", "https://github.com/", "://x"} {
		_, err := RepoKey(s)
		assert.True(t, errors.Is(err, ErrNotRepoURL), "%q: %v", s, err)
	}
}

// FuzzRepoKey: RepoKey never panics, and a key is canonical: lower case,
// a host without scheme, port or user, no slash or ".git" at the end.
func FuzzRepoKey(f *testing.F) {
	for _, s := range []string{"https://github.com/org/app.git", "git@github.com:org/app.git",
		"ssh://git@host:22/a/b", "https://dev.azure.com/o/p/_git/r", "git@ssh.dev.azure.com:v3/o/p/r",
		"https://o.visualstudio.com/DefaultCollection/p/_git/r", "https://host/scm/p/r.git", "::", "@:/", "a:b",
		"https://h/a.git.git/", "git@h:a/.git"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := RepoKey(s)
		if err != nil {
			return
		}
		host, path, ok := strings.Cut(key, "/")
		bare := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if !ok || host == "" || path == "" || strings.ToLower(key) != key || strings.Contains(host, ":") && bare == host ||
			strings.Contains(host, "@") || strings.HasSuffix(key, "/") || strings.HasSuffix(key, ".git") {
			t.Fatalf("RepoKey(%q) = %q: not canonical", s, key)
		}
	})
}
