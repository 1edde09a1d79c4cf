package webhook

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// ErrNotRepoURL is returned for a string that names no repository.
var ErrNotRepoURL = errors.New("not a Git repository URL")

// RepoKey returns the comparison key of a repository URL: lower-case
// "host/path" without scheme, user, port, trailing slash or ".git". Two
// URLs of one repository on one server give the same key whatever the
// transport, so a push reported with a repository's https URL matches a
// GitRepo that clones it over ssh.
func RepoKey(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", ErrNotRepoURL
	}
	var host, path string
	if i := strings.Index(s, "://"); i > 0 && isScheme(s[:i]) {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return "", ErrNotRepoURL
		}
		host, path = u.Hostname(), u.Path
	} else {
		// scp-like: [user@]host:path (no scheme, a colon before any slash).
		colon := strings.Index(s, ":")
		slash := strings.Index(s, "/")
		if colon <= 0 || (slash >= 0 && slash < colon) {
			return "", ErrNotRepoURL
		}
		host, path = s[:colon], s[colon+1:]
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	path = trimPath(strings.ToLower(path))
	if host == "" || path == "" || strings.ContainsAny(host, "/@[]") {
		return "", ErrNotRepoURL
	}
	if strings.Contains(host, ":") {
		// Only an IPv6 literal has colons once the port is gone; it keeps
		// its brackets so the key's host never contains a bare colon.
		ip := net.ParseIP(host)
		if ip == nil {
			return "", ErrNotRepoURL
		}
		host = "[" + ip.String() + "]"
	}
	host, path = azure(host, path)
	path = trimPath(strings.TrimPrefix(path, "scm/")) // Bitbucket Server's https form
	if path == "" {
		return "", ErrNotRepoURL
	}
	return host + "/" + path, nil
}

// trimPath drops slashes and ".git" suffixes at either end.
func trimPath(p string) string {
	for {
		q := strings.TrimSuffix(strings.Trim(p, "/"), ".git")
		if q == p {
			return p
		}
		p = q
	}
}

// azure maps Azure DevOps' spellings to dev.azure.com/ORG/PROJECT/REPO:
// https://dev.azure.com/ORG/PROJECT/_git/REPO, ssh.dev.azure.com:v3/ORG/
// PROJECT/REPO and https://ORG.visualstudio.com/[DefaultCollection/]
// PROJECT/_git/REPO.
func azure(host, path string) (string, string) {
	switch {
	case host == "ssh.dev.azure.com" || host == "vs-ssh.visualstudio.com":
		return "dev.azure.com", strings.TrimPrefix(path, "v3/")
	case host == "dev.azure.com":
		return host, strings.Replace(path, "/_git/", "/", 1)
	case strings.HasSuffix(host, ".visualstudio.com"):
		org := strings.TrimSuffix(host, ".visualstudio.com")
		path = strings.TrimPrefix(path, "defaultcollection/")
		return "dev.azure.com", org + "/" + strings.Replace(path, "/_git/", "/", 1)
	}
	return host, path
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func isScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		other := r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'
		if !letter && (i == 0 || !other) {
			return false
		}
	}
	return s != ""
}

// SearchKey is the value of the FlotillaRepoURL search attribute: the
// repository's key, or the URL itself when it names no repository.
func SearchKey(raw string) string {
	if k, err := RepoKey(raw); err == nil {
		return k
	}
	return raw
}
