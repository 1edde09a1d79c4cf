package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// Provider is a Git host whose push webhooks the receiver understands.
type Provider string

// The providers, named as in the /webhooks/<provider> path and the keys
// of webhook secrets.
const (
	GitHub          Provider = "github"
	GitLab          Provider = "gitlab"
	Gitea           Provider = "gitea"
	Gogs            Provider = "gogs"
	Bitbucket       Provider = "bitbucket"        // Bitbucket Cloud
	BitbucketServer Provider = "bitbucket-server" // Bitbucket Server and Data Center
	AzureDevOps     Provider = "azure-devops"
)

// Providers lists every provider.
var Providers = []Provider{GitHub, GitLab, Gitea, Gogs, Bitbucket, BitbucketServer, AzureDevOps}

// Detect names the provider of a delivery from its headers, "" when none
// is recognised. Gitea is checked first: it also sends Gogs' and GitHub's
// event headers.
func Detect(h http.Header) Provider {
	switch {
	case h.Get("X-Gitea-Event") != "":
		return Gitea
	case h.Get("X-Gogs-Event") != "":
		return Gogs
	case h.Get("X-GitHub-Event") != "":
		return GitHub
	case h.Get("X-Gitlab-Event") != "":
		return GitLab
	case h.Get("X-Event-Key") != "" && (h.Get("X-Hook-UUID") != "" || h.Get("X-Request-UUID") != ""):
		return Bitbucket
	case h.Get("X-Event-Key") != "":
		return BitbucketServer
	case h.Get("X-Vss-Activityid") != "" || h.Get("X-Vss-Subscriptionid") != "":
		return AzureDevOps
	}
	return ""
}

// Kind is what a delivery asks for.
type Kind int

// Kinds of events.
const (
	Unknown Kind = iota // an event the receiver ignores
	Push                // refs changed
	Ping                // the host checks the hook works
	PR                  // a pull (merge) request opened, updated or closed (Event.PullRequest)
)

func (k Kind) String() string {
	switch k {
	case Push:
		return "push"
	case Ping:
		return "ping"
	case PR:
		return "pull_request"
	}
	return "unknown"
}

// Event is what the receiver needs of a delivery.
type Event struct {
	Provider Provider
	Kind     Kind
	// Name is the provider's own event name ("push", "Tag Push Hook",
	// "repo:refs_changed", "git.push", …).
	Name string
	// Delivery identifies the delivery, for deduplication; "" if the
	// provider sends no ID.
	Delivery string
	// RepoURLs are every URL the payload gives for the repository.
	RepoURLs []string
	// DefaultBranch is the repository's default branch, when the payload
	// names it.
	DefaultBranch string
	// Changes are the refs a push moved.
	Changes []Change
	// PullRequest is set for Kind PR.
	PullRequest *PullRequest
}

// Change is one ref a push moved.
type Change struct {
	// Ref is the full ref name: refs/heads/main, refs/tags/v1.
	Ref string
	// Commit is the ref's new commit, 40 lower-case hex; "" when Deleted.
	Commit  string
	Deleted bool
}

// ErrMalformed is wrapped by every Parse error: the body is not the JSON
// the provider documents.
var ErrMalformed = errors.New("malformed webhook payload")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse decodes a delivery's body. Only the fields Flotilla uses are
// decoded, so a field the host adds or retypes (Gitea's created_at is a
// string where GitHub's is a number) cannot break a push. An event it does
// not handle is Kind Unknown with a nil error, and its body is not read.
func Parse(p Provider, h http.Header, body []byte) (Event, error) {
	ev := Event{Provider: p, Name: eventName(p, h), Delivery: deliveryID(p, h)}
	var err error
	switch p {
	case GitHub, Gitea, Gogs:
		err = parseGitHubLike(&ev, h, body)
	case GitLab:
		err = parseGitLab(&ev, body)
	case Bitbucket:
		err = parseBitbucket(&ev, body)
	case BitbucketServer:
		err = parseBitbucketServer(&ev, body)
	case AzureDevOps:
		err = parseAzure(&ev, body)
	default:
		return ev, fmt.Errorf("unknown webhook provider %q", p)
	}
	if err != nil {
		return Event{}, err
	}
	ev.Name, ev.Delivery = clip(ev.Name), clip(ev.Delivery)
	return ev, nil
}

// Bounds on what a delivery can make the receiver keep or query.
const (
	maxIDLength = 128 // event names and delivery IDs (logged, remembered)
	maxRepoURLs = 16
)

// clip bounds a sender-chosen string.
func clip(s string) string {
	if len(s) > maxIDLength {
		return s[:maxIDLength]
	}
	return s
}

func eventName(p Provider, h http.Header) string {
	switch p {
	case GitHub:
		return h.Get("X-GitHub-Event")
	case Gitea:
		return h.Get("X-Gitea-Event")
	case Gogs:
		return h.Get("X-Gogs-Event")
	case GitLab:
		return h.Get("X-Gitlab-Event")
	case Bitbucket, BitbucketServer:
		return h.Get("X-Event-Key")
	}
	return "" // Azure DevOps: the payload's eventType
}

func deliveryID(p Provider, h http.Header) string {
	switch p {
	case GitHub:
		return h.Get("X-GitHub-Delivery")
	case Gitea:
		return firstHeader(h, "X-Gitea-Delivery", "X-Gogs-Delivery", "X-GitHub-Delivery")
	case Gogs:
		return h.Get("X-Gogs-Delivery")
	case GitLab:
		return h.Get("X-Gitlab-Event-UUID")
	case Bitbucket:
		return h.Get("X-Request-UUID")
	case BitbucketServer:
		return h.Get("X-Request-Id")
	}
	return ""
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// decode unmarshals body into v, failing with ErrMalformed.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return malformed("%v", err)
	}
	return nil
}

// githubRepo is the repository object of GitHub, Gitea and Gogs.
type githubRepo struct {
	CloneURL      string `json:"clone_url"`
	SSHURL        string `json:"ssh_url"`
	GitURL        string `json:"git_url"`
	HTMLURL       string `json:"html_url"`
	DefaultBranch string `json:"default_branch"`
	// FullName is "owner/name" (a pull request's head and base repos).
	FullName string `json:"full_name"`
}

func (r *githubRepo) urls() []string {
	return dedupe(nonEmpty(r.CloneURL, r.SSHURL, r.GitURL, r.HTMLURL))
}

func parseGitHubLike(ev *Event, h http.Header, body []byte) error {
	switch ev.Name {
	case "push":
		ev.Kind = Push
	case "ping":
		ev.Kind = Ping
	default:
		if isGitHubPR(ev.Provider, ev.Name) {
			return parseGitHubPR(ev, h, body)
		}
		return nil
	}
	body, err := formPayload(h, body)
	if err != nil {
		return err
	}
	var p struct {
		Ref        string      `json:"ref"`
		After      string      `json:"after"`
		Deleted    bool        `json:"deleted"`
		Repository *githubRepo `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	if p.Repository != nil {
		ev.RepoURLs, ev.DefaultBranch = p.Repository.urls(), p.Repository.DefaultBranch
	}
	if ev.Kind == Ping {
		return nil
	}
	change, err := newChange(p.Ref, p.After, p.Deleted)
	if err != nil {
		return err
	}
	ev.Changes = []Change{change}
	return requireRepo(ev)
}

// formPayload returns the JSON of a GitHub delivery sent as
// application/x-www-form-urlencoded (its "payload" field).
func formPayload(h http.Header, body []byte) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if ct != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, malformed("form body: %v", err)
	}
	if !form.Has("payload") {
		return nil, malformed("form body has no payload field")
	}
	return []byte(form.Get("payload")), nil
}

func parseGitLab(ev *Event, body []byte) error {
	switch ev.Name {
	case "Push Hook", "Tag Push Hook", "System Hook":
	case "Merge Request Hook":
		return parseGitLabMR(ev, body)
	default:
		return nil
	}
	var p struct {
		ObjectKind  string `json:"object_kind"`
		EventName   string `json:"event_name"`
		Ref         string `json:"ref"`
		After       string `json:"after"`
		CheckoutSHA string `json:"checkout_sha"`
		Project     *struct {
			HTTPURL       string `json:"git_http_url"`
			SSHURL        string `json:"git_ssh_url"`
			WebURL        string `json:"web_url"`
			DefaultBranch string `json:"default_branch"`
		} `json:"project"`
		Repository *struct {
			HTTPURL  string `json:"git_http_url"`
			SSHURL   string `json:"git_ssh_url"`
			URL      string `json:"url"`
			Homepage string `json:"homepage"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	if ev.Name == "System Hook" {
		// A system hook carries every kind of event; only pushes matter.
		kind := p.ObjectKind
		if kind == "" {
			kind = p.EventName
		}
		if kind != "push" && kind != "tag_push" {
			return nil
		}
	}
	ev.Kind = Push
	if p.Project != nil {
		ev.RepoURLs = append(ev.RepoURLs, nonEmpty(p.Project.HTTPURL, p.Project.SSHURL, p.Project.WebURL)...)
		ev.DefaultBranch = p.Project.DefaultBranch
	}
	if p.Repository != nil {
		ev.RepoURLs = append(ev.RepoURLs, nonEmpty(p.Repository.HTTPURL, p.Repository.SSHURL, p.Repository.URL, p.Repository.Homepage)...)
	}
	ev.RepoURLs = dedupe(ev.RepoURLs)
	// checkout_sha is the commit; after is the tag object of an annotated
	// tag. It is null when the ref was deleted.
	commit := p.After
	if p.CheckoutSHA != "" {
		commit = p.CheckoutSHA
	}
	change, err := newChange(p.Ref, commit, false)
	if err != nil {
		return err
	}
	ev.Changes = []Change{change}
	return requireRepo(ev)
}

func parseBitbucket(ev *Event, body []byte) error {
	if ev.Name != "repo:push" {
		return nil
	}
	ev.Kind = Push
	type ref struct {
		Type   string `json:"type"`
		Name   string `json:"name"`
		Target struct {
			Hash string `json:"hash"`
		} `json:"target"`
	}
	var p struct {
		Push struct {
			Changes []struct {
				New *ref `json:"new"`
				Old *ref `json:"old"`
			} `json:"changes"`
		} `json:"push"`
		Repository *struct {
			FullName string `json:"full_name"`
			Links    struct {
				HTML struct {
					Href string `json:"href"`
				} `json:"html"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	if p.Repository != nil {
		full := ""
		if p.Repository.FullName != "" {
			full = "https://bitbucket.org/" + p.Repository.FullName
		}
		ev.RepoURLs = dedupe(nonEmpty(p.Repository.Links.HTML.Href, full))
	}
	for _, c := range p.Push.Changes {
		r, deleted := c.New, false
		if r == nil {
			r, deleted = c.Old, true
		}
		if r == nil {
			return malformed("push change has neither new nor old")
		}
		prefix := "refs/heads/"
		if r.Type == "tag" || r.Type == "annotated_tag" {
			prefix = "refs/tags/"
		}
		change, err := newChange(prefix+r.Name, r.Target.Hash, deleted)
		if err != nil {
			return err
		}
		ev.Changes = append(ev.Changes, change)
	}
	return requireRepo(ev)
}

func parseBitbucketServer(ev *Event, body []byte) error {
	switch ev.Name {
	case "diagnostics:ping":
		ev.Kind = Ping
		return nil
	case "repo:refs_changed":
		ev.Kind = Push
	default:
		return nil
	}
	type link struct {
		Href string `json:"href"`
	}
	var p struct {
		Changes []struct {
			Ref struct {
				ID string `json:"id"`
			} `json:"ref"`
			RefID  string `json:"refId"`
			ToHash string `json:"toHash"`
			Type   string `json:"type"`
		} `json:"changes"`
		Repository *struct {
			Slug    string `json:"slug"`
			Project struct {
				Key string `json:"key"`
			} `json:"project"`
			Links struct {
				Clone []link `json:"clone"`
				Self  []link `json:"self"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	if r := p.Repository; r != nil {
		for _, l := range r.Links.Clone {
			ev.RepoURLs = append(ev.RepoURLs, nonEmpty(l.Href)...)
		}
		for _, l := range r.Links.Self {
			// https://host/projects/KEY/repos/slug/browse → https://host/KEY/slug
			if u, ok := serverBrowseURL(l.Href, r.Project.Key, r.Slug); ok {
				ev.RepoURLs = append(ev.RepoURLs, u)
			}
		}
		ev.RepoURLs = dedupe(ev.RepoURLs)
	}
	for _, c := range p.Changes {
		ref := c.Ref.ID
		if ref == "" {
			ref = c.RefID
		}
		change, err := newChange(ref, c.ToHash, strings.EqualFold(c.Type, "DELETE"))
		if err != nil {
			return err
		}
		ev.Changes = append(ev.Changes, change)
	}
	return requireRepo(ev)
}

// serverBrowseURL turns a Bitbucket Server web link into the clone path
// form RepoKey understands: /projects/KEY/repos/SLUG/... → /KEY/SLUG.
func serverBrowseURL(href, key, slug string) (string, bool) {
	u, err := url.Parse(href)
	if err != nil || u.Host == "" || key == "" || slug == "" {
		return "", false
	}
	prefix, _, ok := strings.Cut(u.Path, "/projects/")
	if !ok {
		return "", false
	}
	return u.Scheme + "://" + u.Host + prefix + "/" + key + "/" + slug, true
}

func parseAzure(ev *Event, body []byte) error {
	var p struct {
		ID        string `json:"id"`
		EventType string `json:"eventType"`
		Resource  *struct {
			RefUpdates []struct {
				Name        string `json:"name"`
				NewObjectID string `json:"newObjectId"`
			} `json:"refUpdates"`
			Repository *struct {
				RemoteURL     string `json:"remoteUrl"`
				SSHURL        string `json:"sshUrl"`
				WebURL        string `json:"webUrl"`
				DefaultBranch string `json:"defaultBranch"`
			} `json:"repository"`
		} `json:"resource"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	ev.Name, ev.Delivery = p.EventType, p.ID
	if p.EventType != "git.push" {
		return nil
	}
	ev.Kind = Push
	if p.Resource == nil {
		return malformed("git.push without resource")
	}
	if r := p.Resource.Repository; r != nil {
		ev.RepoURLs = dedupe(nonEmpty(r.RemoteURL, r.SSHURL, r.WebURL))
		ev.DefaultBranch = strings.TrimPrefix(r.DefaultBranch, "refs/heads/")
	}
	for _, u := range p.Resource.RefUpdates {
		change, err := newChange(u.Name, u.NewObjectID, false)
		if err != nil {
			return err
		}
		ev.Changes = append(ev.Changes, change)
	}
	return requireRepo(ev)
}

// newChange validates one moved ref; an all-zero commit is a deletion.
func newChange(ref, commit string, deleted bool) (Change, error) {
	if !strings.HasPrefix(ref, "refs/") || strings.HasSuffix(ref, "/") || strings.ContainsAny(ref, " \x00") {
		return Change{}, malformed("ref %q is not a full ref name", ref)
	}
	commit = strings.ToLower(commit)
	if deleted || commit == strings.Repeat("0", 40) {
		return Change{Ref: ref, Deleted: true}, nil
	}
	if !gitsource.IsFullHash(commit) {
		return Change{}, malformed("ref %s: commit %q is not a 40-hex hash", ref, commit)
	}
	return Change{Ref: ref, Commit: commit}, nil
}

func requireRepo(ev *Event) error {
	if len(ev.RepoURLs) == 0 {
		return malformed("%s %s names no repository URL", ev.Provider, ev.Name)
	}
	if ev.Kind == Push && len(ev.Changes) == 0 {
		return malformed("%s %s changes no ref", ev.Provider, ev.Name)
	}
	return nil
}

func nonEmpty(ss ...string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// dedupe drops repeated strings, keeping at most maxRepoURLs.
func dedupe(ss []string) []string {
	out := ss[:0]
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if len(out) == maxRepoURLs {
			break
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
