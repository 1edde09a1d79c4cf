package webhook

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func FuzzParseGitHub(f *testing.F) {
	fuzzParse(f, GitHub, "push", "ping", "issues", "pull_request")
}

func FuzzParseGitLab(f *testing.F) {
	fuzzParse(f, GitLab, "Push Hook", "Tag Push Hook", "System Hook", "Merge Request Hook")
}

func FuzzParseGitea(f *testing.F) {
	fuzzParse(f, Gitea, "push", "ping", "pull_request")
}

func FuzzParseGogs(f *testing.F) {
	fuzzParse(f, Gogs, "push", "create")
}

func FuzzParseBitbucket(f *testing.F) {
	fuzzParse(f, Bitbucket, "repo:push", "pullrequest:created")
}

func FuzzParseBitbucketServer(f *testing.F) {
	fuzzParse(f, BitbucketServer, "repo:refs_changed", "diagnostics:ping")
}

func FuzzParseAzureDevOps(f *testing.F) {
	fuzzParse(f, AzureDevOps, "")
}

// stringField matches a JSON string member whose value Parse reads (or sits
// next to one), so a seed can give it a number instead.
var stringField = regexp.MustCompile(`"(ref|after|checkout_sha|clone_url|ssh_url|html_url|git_http_url|web_url|hash|name|type|id|refId|toHash|newObjectId|remoteUrl|href|eventType|default_branch|defaultBranch)"\s*:\s*"[^"]*"`)

// objectField matches the opening of a member holding an object or array
// Parse descends into, so a seed can null it.
var objectField = regexp.MustCompile(`"(repository|project|push|changes|new|target|links|clone|resource|refUpdates)"\s*:\s*[\[{]`)

type fuzzSeed struct {
	event string
	body  []byte
}

// fuzzSeeds are p's fixtures, broken variants of them, and bodies of the
// wrong shape sent as each of events.
func fuzzSeeds(f *testing.F, p Provider, events ...string) []fuzzSeed {
	var seeds []fuzzSeed
	for _, tc := range fixtureCases {
		if tc.provider != p {
			continue
		}
		body := readFixture(f, tc.file)
		variants := [][]byte{body, body[:len(body)/2], body[:len(body)-1]}
		retyped := map[string]bool{}
		for _, m := range stringField.FindAllSubmatch(body, -1) {
			key := string(m[1])
			if retyped[key] {
				continue
			}
			retyped[key] = true
			re := regexp.MustCompile(`"` + key + `"\s*:\s*"[^"]*"`)
			variants = append(variants, re.ReplaceAll(body, []byte(`"`+key+`": 12345`)))
		}
		for _, loc := range objectField.FindAllSubmatchIndex(body, -1) {
			key := body[loc[2]:loc[3]]
			// Null the member and keep its old value, now under a key
			// nobody reads, so the JSON stays valid.
			var b bytes.Buffer
			b.Write(body[:loc[0]])
			b.WriteString(`"` + string(key) + `": null, "_` + string(key) + `": `)
			b.Write(body[loc[1]-1:])
			variants = append(variants, b.Bytes())
		}
		variants = append(variants,
			bytes.ReplaceAll(body, []byte(`"refs/`), []byte(`"REFS/`)),
			bytes.ReplaceAll(body, []byte(zeros), []byte(zeros[1:])))
		for _, v := range variants {
			seeds = append(seeds, fuzzSeed{tc.event, v})
		}
	}
	odd := [][]byte{nil, []byte(`null`), []byte(`[]`), []byte(`{}`), []byte(`0`), []byte(`"x"`),
		[]byte(`{"ref": 1, "after": 2, "repository": 3}`),
		[]byte(`{"push": {"changes": [null]}, "repository": {"links": {"html": {"href": "https://bitbucket.org/a/b"}}}}`),
		[]byte(`{"changes": [{"ref": {"id": "refs/heads/x"}, "toHash": "` + strings.Repeat("A", 40) + `"}], "repository": {"links": {"clone": [{"href": "ssh://h/a/b"}]}}}`),
		[]byte(`{"eventType": "git.push", "resource": null}`),
		[]byte(`{"eventType": "git.push", "resource": {"refUpdates": [{"name": "refs/heads/main", "newObjectId": ""}], "repository": {"remoteUrl": "https://dev.azure.com/o/p/_git/r"}}}`),
	}
	for _, e := range events {
		for _, b := range odd {
			seeds = append(seeds, fuzzSeed{e, b})
		}
	}
	return seeds
}

func fuzzParse(f *testing.F, p Provider, events ...string) {
	for _, s := range fuzzSeeds(f, p, events...) {
		f.Add(s.event, s.body)
	}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		checkParse(t, p, deliveryHeaders(p, event, "fuzz"), body, event)
		if p == GitHub {
			h := deliveryHeaders(p, event, "fuzz")
			h.Set("Content-Type", "application/x-www-form-urlencoded")
			form := url.Values{"payload": {string(body)}}.Encode()
			checkParse(t, p, h, []byte(form), event)
			checkParse(t, p, h, body, event) // whatever the body, as form data
		}
	})
}

// checkParse holds Parse to its contract for any input.
func checkParse(t *testing.T, p Provider, h http.Header, body []byte, event string) {
	t.Helper()
	ev, err := Parse(p, h, body)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		return
	}
	if ev.Provider != p {
		t.Fatalf("Provider = %q, want %q", ev.Provider, p)
	}
	if p != AzureDevOps && ev.Name != clip(h.Get(eventHeader(p))) {
		t.Fatalf("Name = %q, want the event header %q (clipped)", ev.Name, event)
	}
	if len(ev.Name) > maxIDLength || len(ev.Delivery) > maxIDLength || len(ev.RepoURLs) > maxRepoURLs {
		t.Fatalf("unbounded event: name %d, delivery %d bytes, %d URLs", len(ev.Name), len(ev.Delivery), len(ev.RepoURLs))
	}
	switch ev.Kind {
	case Push:
		if len(ev.RepoURLs) == 0 {
			t.Fatalf("push without RepoURLs: %+v", ev)
		}
		if len(ev.Changes) == 0 {
			t.Fatalf("push without changes: %+v", ev)
		}
		for _, c := range ev.Changes {
			if !strings.HasPrefix(c.Ref, "refs/") || c.Ref == "refs/" {
				t.Fatalf("change ref %q is not a full ref name", c.Ref)
			}
			if c.Deleted != (c.Commit == "") {
				t.Fatalf("change %+v: Commit must be empty exactly when Deleted", c)
			}
			if !c.Deleted && !isLowerHex40(c.Commit) {
				t.Fatalf("change %+v: Commit is not 40 lower-case hex", c)
			}
		}
	case Ping, Unknown:
		if len(ev.Changes) != 0 {
			t.Fatalf("%v event with changes: %+v", ev.Kind, ev)
		}
	default:
		t.Fatalf("Kind %d is none of Unknown, Push, Ping", ev.Kind)
	}
	seen := map[string]bool{}
	for _, u := range ev.RepoURLs {
		if strings.TrimSpace(u) == "" || seen[u] {
			t.Fatalf("RepoURLs %q: empty or duplicate entry", ev.RepoURLs)
		}
		seen[u] = true
	}
}

func eventHeader(p Provider) string {
	switch p {
	case GitHub:
		return "X-GitHub-Event"
	case GitLab:
		return "X-Gitlab-Event"
	case Gitea:
		return "X-Gitea-Event"
	case Gogs:
		return "X-Gogs-Event"
	}
	return "X-Event-Key"
}

func isLowerHex40(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// FuzzVerify: no header or body makes Verify or Signed panic; a header
// verifies only if it holds the correct credential; what sign makes always
// verifies, and stops verifying when the body or the secret changes.
func FuzzVerify(f *testing.F) {
	body := readFixture(f, "github-push.json")
	key := secretFor(GitHub).Token
	mac := hmacHex(key, body)
	for i, p := range Providers {
		h := http.Header{}
		sign(p, h, body, secretFor(p))
		for name, values := range h {
			f.Add(uint8(i), name, values[0], body)
			f.Add(uint8(i), name, values[0], body[1:])
			f.Add(uint8(i), name, strings.ToUpper(values[0]), body)
			f.Add(uint8(i), name, values[0][:len(values[0])-1], body)
		}
		f.Add(uint8(i), "X-Hub-Signature-256", "sha256=", []byte{})
		f.Add(uint8(i), "Authorization", "Basic Og==", []byte{})
		f.Add(uint8(i), "X-Gitea-Signature", " "+mac+" ", body)
		f.Add(uint8(i), "X-Gitlab-Token", "", []byte(nil))
	}
	f.Fuzz(func(t *testing.T, pi uint8, name, value string, body []byte) {
		p := Providers[int(pi)%len(Providers)]
		s := secretFor(p)
		h := http.Header{}
		h.Set(name, value)
		Signed(p, h)
		verified := Verify(p, h, body, s)
		if verified && !holdsCredential(p, h, body, s) {
			t.Fatalf("%s: %s: %q verified but is not the credential", p, name, value)
		}
		if verified && !WellFormed(p, h) {
			t.Fatalf("%s: %s: %q verified but is refused as not well formed", p, name, value)
		}
		if Verify(p, h, body, Secret{}) {
			t.Fatalf("%s: verified against an empty secret", p)
		}

		h = http.Header{}
		sign(p, h, body, s)
		if !Verify(p, h, body, s) {
			t.Fatalf("%s: own signature of %q does not verify", p, body)
		}
		if !Signed(p, h) || !WellFormed(p, h) {
			t.Fatalf("%s: signed delivery not Signed or not WellFormed", p)
		}
		if Verify(p, h, body, wrongSecretFor(p)) {
			t.Fatalf("%s: verified against the wrong secret", p)
		}
		if bodyBound(p) && Verify(p, h, append(append([]byte{}, body...), 'x'), s) {
			t.Fatalf("%s: verified a changed body", p)
		}
	})
}

// holdsCredential reports whether h carries the credential s gives for
// body, reading the headers independently of auth.go. Case and
// surrounding space in hex are tolerated: they change no bit of the MAC.
func holdsCredential(p Provider, h http.Header, body []byte, s Secret) bool {
	mac := hmacHex(s.Token, body)
	hexOK := func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), mac) }
	prefixedOK := func(v string) bool {
		rest, ok := strings.CutPrefix(v, "sha256=")
		return ok && hexOK(rest)
	}
	switch p {
	case GitHub:
		return prefixedOK(h.Get("X-Hub-Signature-256"))
	case Gitea:
		return hexOK(h.Get("X-Gitea-Signature")) || prefixedOK(h.Get("X-Hub-Signature-256"))
	case Gogs:
		return hexOK(h.Get("X-Gogs-Signature"))
	case GitLab:
		return h.Get("X-Gitlab-Token") == s.Token
	case Bitbucket, BitbucketServer:
		return prefixedOK(h.Get("X-Hub-Signature"))
	case AzureDevOps:
		user, pass, ok := (&http.Request{Header: h}).BasicAuth()
		return ok && user == s.Username && pass == s.Password
	}
	return false
}
