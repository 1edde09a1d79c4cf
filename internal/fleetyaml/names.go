package fleetyaml

import (
	"crypto/md5" //nolint:gosec // Fleet-compatible name suffixes, not security.
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxReleaseNameLen is the longest name Helm accepts for a release.
const MaxReleaseNameLen = 53

// ReleaseName turns any string, typically "<repo>/<path>", into a valid Helm
// release name the way Fleet's names.HelmReleaseName does, so bundles keep
// the names (and releases) they had under Fleet:
//
//   - "/" becomes "-";
//   - if the result has upper-case letters or characters other than
//     [a-zA-Z0-9-] (dots included), "-" and the first 8 hex digits of its MD5
//     are appended, so names that differ only there stay distinct;
//   - it is lower-cased, every run of other characters becomes one "-",
//     runs of "-" collapse and leading and trailing "-" go;
//   - names longer than 53 characters keep their first 47 and get "-" and
//     5 hex digits of the MD5 of the whole name;
//   - if nothing valid is left, the result is 24 hex digits of the MD5 of
//     the input.
//
// The result always satisfies ValidReleaseName.
func ReleaseName(name string) string {
	s := strings.ReplaceAll(name, "/", "-")
	if s != strings.ToLower(s) || strings.IndexFunc(s, func(r rune) bool { return !isNameChar(r) }) >= 0 {
		s += "-" + md5Hex(s, 8)
	}
	// After cleaning, s matches the release-name pattern unless it is empty.
	s = cleanName(strings.ToLower(s))
	if s == "" {
		return md5Hex(name, 24)
	}
	return limitName(s, MaxReleaseNameLen)
}

// ValidReleaseName reports whether Helm accepts s as a release name: at
// most 53 characters matching
// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$.
func ValidReleaseName(s string) bool {
	// A DNS-1123 subdomain is exactly that pattern (up to 253 characters).
	return len(s) <= MaxReleaseNameLen && len(validation.IsDNS1123Subdomain(s)) == 0
}

func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

// cleanName replaces each run of characters outside [a-z0-9-], and each run
// of "-", by a single "-", and trims "-" from both ends. s is lower case.
func cleanName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if isNameChar(r) && r != '-' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// limitName shortens s to at most n characters by keeping a prefix and
// appending "-" and 5 hex digits of its MD5. When the prefix already ends
// in "-", no second "-" is added (and the result is one shorter).
func limitName(s string, n int) string {
	const hashLen = 5
	if len(s) <= n {
		return s
	}
	keep := n - hashLen - 1
	sep := "-"
	if s[keep-1] == '-' {
		sep = ""
	}
	return s[:keep] + sep + md5Hex(s, hashLen)
}

func md5Hex(s string, n int) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // See import.
	return hex.EncodeToString(sum[:])[:n]
}
