// Package chartfetch downloads the remote Helm charts that a fleet.yaml
// `helm:` block names, the way Rancher Fleet does at bundle-read time.
//
// A chart can come from
//
//   - a URL of a chart archive (`chart: https://host/path/x.tgz`), optionally
//     with a `?checksum=<hex>` query that the downloaded archive must match;
//   - a Helm repository (`repo: https://host/charts`, `chart: name`,
//     `version: <exact version or semver constraint>`), read through its
//     index.yaml;
//   - an OCI registry (`repo: oci://registry/path` with `chart: name`, or
//     `chart: oci://registry/path/name`), pulled with Helm's registry client.
//
// Fleet embeds the fetched chart files into the bundle under
// `.chart/<Checksum(src)>/`; [Checksum] computes that key and [Chart.Files]
// holds the archive's files byte for byte.
//
// [Fetcher.BuildDependencies] does what `helm dependency build` does for a
// chart whose dependencies are not vendored under charts/.
package chartfetch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of these when the
// cause is known; any other error (a refused connection, a timeout, a 5xx
// answer) is a plain error that may go away when retried.
var (
	// ErrNotFound: the chart, or a version matching the requested one, does
	// not exist (not in the repository index, HTTP 404, no matching OCI tag).
	ErrNotFound = errors.New("chart not found")
	// ErrChecksum: the downloaded archive does not match the expected digest.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrAuth: the server refused the credentials (HTTP 401 or 403).
	ErrAuth = errors.New("access denied")
	// ErrUnsupportedSource: the source is of a kind this package cannot
	// fetch (for example a go-getter git source) or is malformed.
	ErrUnsupportedSource = errors.New("unsupported chart source")
	// ErrInvalidArchive: the download is not a usable chart archive (not
	// gzip-compressed tar, too large, unsafe paths, invalid Chart.yaml).
	ErrInvalidArchive = errors.New("invalid chart archive")
)

// File is one file of a chart, named by its slash path inside the archive
// (e.g. "guestbook/Chart.yaml").
type File struct {
	Name string
	Data []byte
}

// Source is fleet.yaml's helm.chart, helm.repo and helm.version.
type Source struct {
	Chart, Repo, Version string
}

// String describes the source for messages, with any password in its URLs
// redacted.
func (s Source) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chart %q", redactURL(s.Chart))
	if s.Version != "" {
		fmt.Fprintf(&b, " version %q", s.Version)
	}
	if s.Repo != "" {
		fmt.Fprintf(&b, " from repository %s", redactURL(s.Repo))
	}
	return b.String()
}

// IsRemote reports whether src needs downloading: Repo is set, or Chart is a
// URL (anything with a scheme, such as https:// or oci://) or a go-getter
// source (a forced getter such as "git::…", or a shorthand such as
// "github.com/user/repo//dir" or "git@host:repo"). A plain relative or
// absolute directory path is local.
func IsRemote(src Source) bool {
	if src.Repo != "" {
		return true
	}
	c := src.Chart
	return strings.Contains(c, "://") || strings.Contains(c, "::") || isGetterShorthand(c)
}

// getterShorthands are the host prefixes that go-getter's detectors turn
// into git (or bucket) sources when given without a scheme.
var getterShorthands = []string{
	"github.com/",
	"gitlab.com/",
	"bitbucket.org/",
	"git@",
}

func isGetterShorthand(c string) bool {
	for _, p := range getterShorthands {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	// Amazon S3 and Google Cloud Storage shorthands.
	host, _, _ := strings.Cut(c, "/")
	return strings.HasSuffix(host, ".amazonaws.com") || host == "www.googleapis.com"
}

// Checksum returns Fleet's directory key for src: the hex sha256 of
// chart + ":" + repo + ":" + version, computed from the source as written
// (never from a mirrored URL).
func Checksum(src Source) string {
	sum := sha256.Sum256([]byte(src.Chart + ":" + src.Repo + ":" + src.Version))
	return hex.EncodeToString(sum[:])
}

// redactURL hides the password of a URL's userinfo. Strings that do not
// parse as URLs with a host are returned unchanged.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(s, "@") && strings.Contains(s, "://") {
			// Unparsable but possibly holding credentials: keep scheme only.
			scheme, _, _ := strings.Cut(s, "://")
			return scheme + "://<redacted>"
		}
		return s
	}
	return u.Redacted()
}

// ParseMirrors parses FROM=TO flag values into Fetcher.Mirrors.
func ParseMirrors(flags []string) (map[string]string, error) {
	out := make(map[string]string, len(flags))
	for _, m := range flags {
		from, to, ok := strings.Cut(m, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("chart mirror %q: want FROM=TO", m)
		}
		out[from] = to
	}
	return out, nil
}
