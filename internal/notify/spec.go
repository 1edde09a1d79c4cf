package notify

import (
	"path"
	"slices"
)

// Provider names where a Notification delivers.
type Provider string

// The providers.
const (
	// Webhook POSTs each event as a CloudEvent (structured JSON), signed
	// with HMAC-SHA256 when the Secret has a token.
	Webhook Provider = "webhook"
	// Slack posts to a Slack incoming webhook.
	Slack Provider = "slack"
	// MSTeams posts an Adaptive Card to a Microsoft Teams webhook.
	MSTeams Provider = "msteams"
	// GitHub, GitLab and Gitea set a commit status on the event's commit.
	GitHub Provider = "github"
	GitLab Provider = "gitlab"
	Gitea  Provider = "gitea"
)

// Providers lists every provider, in a stable order.
var Providers = []Provider{Webhook, Slack, MSTeams, GitHub, GitLab, Gitea}

// CommitStatus reports whether p sets commit statuses (and so delivers
// only the rollout events that map to a status).
func (p Provider) CommitStatus() bool { return p == GitHub || p == GitLab || p == Gitea }

// SecretRef names a Secret of the Notification's namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// Spec is a Notification's spec: where to deliver (Provider, Address,
// SecretRef) and which events (the filters). The Secret's keys: "token"
// (webhook: the HMAC key; github, gitlab, gitea: the API token) and
// "address" (slack, msteams: the webhook URL, which is a credential).
type Spec struct {
	Provider Provider `json:"provider"`
	// Address is the webhook URL, or the API base of github, gitlab and
	// gitea (optional: derived from the event's repository URL). Slack and
	// Teams may take it from the Secret's "address" key instead.
	Address   string     `json:"address,omitempty"`
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// EventTypes selects events by type. Empty: every type but History.
	EventTypes []Type `json:"eventTypes,omitempty"`
	// Severity is the minimum severity delivered. Empty: info.
	Severity Severity `json:"severity,omitempty"`
	// GitRepos, Bundles and Clusters are globs (path.Match) an event's
	// GitRepo, one of its bundles and one of its clusters must match.
	// Empty: no filter. An event that names none (a cluster event has no
	// GitRepo) does not pass a filter that is set.
	GitRepos []string `json:"gitRepos,omitempty"`
	Bundles  []string `json:"bundles,omitempty"`
	Clusters []string `json:"clusters,omitempty"`
	// Suspend stops delivery; events that arrive meanwhile are dropped.
	Suspend bool `json:"suspend,omitempty"`
}

// Severities lists the severities, least severe first.
var Severities = []Severity{Info, Warning, Error}

// rank orders severities; an unknown one ranks as info.
func (s Severity) rank() int { return max(slices.Index(Severities, s), 0) }

// statusTypes are the events a commit-status provider delivers.
var statusTypes = []Type{RolloutStarted, RolloutSucceeded, RolloutFailed, RolloutHalted}

// Matches reports whether the Notification of spec s delivers ev: it is
// not suspended, and ev passes every filter (type, minimum severity,
// GitRepo, bundle and cluster globs). A commit-status provider takes only
// the rollout events that map to a state, of a known repository and
// commit.
func (s Spec) Matches(ev Event) bool {
	if s.Suspend || ev.Severity.rank() < s.Severity.rank() {
		return false
	}
	if len(s.EventTypes) == 0 && ev.Type == History || len(s.EventTypes) > 0 && !slices.Contains(s.EventTypes, ev.Type) {
		return false
	}
	if s.Provider.CommitStatus() && (!slices.Contains(statusTypes, ev.Type) || ev.Commit == "" || ev.RepoURL == "") {
		return false
	}
	var gitRepos []string
	if ev.GitRepo != "" {
		gitRepos = []string{ev.GitRepo}
	}
	return anyMatch(s.GitRepos, gitRepos) && anyMatch(s.Bundles, ev.Bundles) && anyMatch(s.Clusters, ev.Clusters)
}

// anyMatch: no globs, or one of names matches one of them.
func anyMatch(globs, names []string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		for _, n := range names {
			if ok, _ := path.Match(g, n); ok { // patterns are validated on apply
				return true
			}
		}
	}
	return false
}
