package api

import "strings"

// RedactURL returns raw without userinfo ("https://user:pw@host/x" becomes
// "https://host/x"). It works on strings that do not parse as URLs too, so
// it is safe for any message.
func RedactURL(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + 3
	}
	end := len(raw)
	if i := strings.IndexAny(raw[start:], "/?#"); i >= 0 {
		end = start + i
	}
	at := strings.LastIndex(raw[start:end], "@")
	if at < 0 {
		return raw
	}
	return raw[:start] + raw[start+at+1:]
}

// IsSSHURL reports whether raw is an ssh://, git+ssh:// or ssh+git:// URL,
// or scp-like ([user@]host:path: no scheme, no '/' before the first colon),
// as git reads them.
func IsSSHURL(raw string) bool {
	if i := strings.Index(raw, "://"); i >= 0 {
		switch raw[:i] {
		case "ssh", "git+ssh", "ssh+git":
			return true
		}
		return false
	}
	colon := strings.Index(raw, ":")
	return colon > 0 && !strings.Contains(raw[:colon], "/")
}
