package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureCase is one payload under testdata/payloads as its provider
// delivers it, and what Parse must make of it.
type fixtureCase struct {
	file     string
	provider Provider
	event    string // event header; Azure DevOps names its event in the body
	delivery string // delivery ID header value (Azure DevOps: none)
	clone    string // the repository's canonical https clone URL
	want     Event  // RepoURLs: those that must be among the parsed ones
}

const zeros = "0000000000000000000000000000000000000000"

var githubURLs = []string{
	"https://github.com/flotilla-gitops/app.git",
	"git@github.com:flotilla-gitops/app.git",
	"git://github.com/flotilla-gitops/app.git",
	"https://github.com/flotilla-gitops/app",
}

var fixtureCases = []fixtureCase{
	{
		file: "github-push.json", provider: GitHub, event: "push",
		delivery: "0fdb75a9-7032-4917-b7c4-020afc7da016",
		clone:    "https://github.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "push", RepoURLs: githubURLs, DefaultBranch: "main",
			Changes: []Change{{Ref: "refs/heads/main", Commit: "7dd52b69157ba70883ba3c139d6ffad9547a71f7"}},
		},
	},
	{
		file: "github-push-tag.json", provider: GitHub, event: "push",
		delivery: "db0f7ba4-25b0-43a6-8967-121506efef5e",
		clone:    "https://github.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "push", RepoURLs: githubURLs, DefaultBranch: "main",
			Changes: []Change{{Ref: "refs/tags/v1.0.0", Commit: "4cb987dfc65d2d4b70af5a36ae43c42b3d46fa3b"}},
		},
	},
	{
		file: "github-push-delete.json", provider: GitHub, event: "push",
		delivery: "e5ccdaf9-8c4a-4201-bd95-f4ff997a11d5",
		clone:    "https://github.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "push", RepoURLs: githubURLs, DefaultBranch: "main",
			Changes: []Change{{Ref: "refs/heads/feature/canary", Deleted: true}},
		},
	},
	{
		file: "github-ping.json", provider: GitHub, event: "ping",
		delivery: "742c774f-0b27-4e18-ae04-42aa51ebf831",
		clone:    "https://github.com/flotilla-gitops/app.git",
		want:     Event{Kind: Ping, Name: "ping", RepoURLs: githubURLs, DefaultBranch: "main"},
	},
	{
		file: "gitlab-push.json", provider: GitLab, event: "Push Hook",
		delivery: "341995a1-a18f-4fd8-9c50-886f48c7a9f0",
		clone:    "https://gitlab.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "Push Hook", DefaultBranch: "main",
			RepoURLs: []string{
				"https://gitlab.com/flotilla-gitops/app.git",
				"git@gitlab.com:flotilla-gitops/app.git",
				"https://gitlab.com/flotilla-gitops/app",
			},
			Changes: []Change{{Ref: "refs/heads/main", Commit: "6c3bd43f199a9726419025c836310fe4b071af14"}},
		},
	},
	{
		file: "gitlab-tag-push.json", provider: GitLab, event: "Tag Push Hook",
		delivery: "b7d1a26c-4ca4-4ee2-aada-9e69886f07a2",
		clone:    "https://gitlab.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "Tag Push Hook", DefaultBranch: "main",
			RepoURLs: []string{
				"https://gitlab.com/flotilla-gitops/app.git",
				"git@gitlab.com:flotilla-gitops/app.git",
				"https://gitlab.com/flotilla-gitops/app",
			},
			Changes: []Change{{Ref: "refs/tags/v1.0.0", Commit: "2370c225288e9433a3722c1288720d22fb245962"}},
		},
	},
	{
		file: "gitea-push.json", provider: Gitea, event: "push",
		delivery: "a02902f4-c3a8-4ac4-8178-5e20dc0de265",
		clone:    "https://gitea.example.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "push", DefaultBranch: "main",
			RepoURLs: []string{
				"https://gitea.example.com/flotilla-gitops/app.git",
				"git@gitea.example.com:flotilla-gitops/app.git",
				"https://gitea.example.com/flotilla-gitops/app",
			},
			Changes: []Change{{Ref: "refs/heads/main", Commit: "52e2c40a2f20ff1457da29183ad485d1901e940f"}},
		},
	},
	{
		file: "gogs-push.json", provider: Gogs, event: "push",
		delivery: "66341e28-aabf-4fdc-a51f-e5cc0622e78d",
		clone:    "https://gogs.example.com/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "push", DefaultBranch: "master",
			RepoURLs: []string{
				"https://gogs.example.com/flotilla-gitops/app.git",
				"ssh://git@gogs.example.com:2222/flotilla-gitops/app.git",
				"https://gogs.example.com/flotilla-gitops/app",
			},
			Changes: []Change{{Ref: "refs/heads/master", Commit: "f284b0ab67dfaa42c27cda41dd52b011b3a01d80"}},
		},
	},
	{
		file: "bitbucket-push.json", provider: Bitbucket, event: "repo:push",
		delivery: "241c0065-4d70-4e6e-a166-2f5a0c76fd84",
		clone:    "https://bitbucket.org/flotilla-gitops/app.git",
		want: Event{
			Kind: Push, Name: "repo:push",
			RepoURLs: []string{"https://bitbucket.org/flotilla-gitops/app"},
			Changes: []Change{
				{Ref: "refs/heads/main", Commit: "425c4c00697a4c89a5d513f3625c8af1cdd29145"},
				{Ref: "refs/tags/v1.0.0", Commit: "47fc5e2adb539180cfd4a2ce06b69ec59c27fcf9"},
			},
		},
	},
	{
		file: "bitbucket-server-push.json", provider: BitbucketServer, event: "repo:refs_changed",
		delivery: "53dcabf0-2ab0-4205-a8b0-88012db5f479",
		clone:    "https://bitbucket.example.com/scm/flt/app.git",
		want: Event{
			Kind: Push, Name: "repo:refs_changed",
			RepoURLs: []string{
				"ssh://git@bitbucket.example.com:7999/flt/app.git",
				"https://bitbucket.example.com/scm/flt/app.git",
			},
			Changes: []Change{
				{Ref: "refs/heads/main", Commit: "96a4b6d09cf22c52530dc488965c55ea6c9c6f87"},
				{Ref: "refs/tags/v1.0.0", Commit: "9102477f02df18f7e2c6b09838b162c8b330e413"},
				{Ref: "refs/heads/feature/canary", Deleted: true},
			},
		},
	},
	{
		file: "azure-devops-push.json", provider: AzureDevOps,
		clone: "https://dev.azure.com/flotilla/gitops/_git/app",
		want: Event{
			Kind: Push, Name: "git.push", Delivery: "b3a1c9d2-8e7f-4a6b-9c5d-2e1f0a9b8c7d", DefaultBranch: "main",
			RepoURLs: []string{
				"https://dev.azure.com/flotilla/gitops/_git/app",
				"git@ssh.dev.azure.com:v3/flotilla/gitops/app",
			},
			Changes: []Change{{Ref: "refs/heads/main", Commit: "8189e56111bcb22b45571d452ad7b7c1a649c271"}},
		},
	},
}

// deliveryHeaders are the headers provider p sends with a delivery of
// event, including the ones Parse has no use for.
func deliveryHeaders(p Provider, event, delivery string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch p {
	case GitHub:
		h.Set("User-Agent", "GitHub-Hookshot/8e03811")
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", delivery)
		h.Set("X-GitHub-Hook-ID", "512886491")
		h.Set("X-GitHub-Hook-Installation-Target-ID", "813370231")
		h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	case Gitea:
		// Gitea announces itself as Gogs and GitHub too.
		h.Set("User-Agent", "Go-http-client/1.1")
		for _, prefix := range []string{"X-Gitea-", "X-Gogs-", "X-GitHub-"} {
			h.Set(prefix+"Event", event)
			h.Set(prefix+"Delivery", delivery)
		}
		h.Set("X-Gitea-Event-Type", event)
		h.Set("X-GitHub-Event-Type", event)
		h.Set("X-Gitea-Hook-Installation-Target-Type", "repository")
	case Gogs:
		h.Set("User-Agent", "GogsServer")
		h.Set("X-Gogs-Event", event)
		h.Set("X-Gogs-Delivery", delivery)
	case GitLab:
		h.Set("User-Agent", "GitLab/18.1.0-pre")
		h.Set("X-Gitlab-Event", event)
		h.Set("X-Gitlab-Event-UUID", delivery)
		h.Set("X-Gitlab-Webhook-UUID", "9f6a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b")
		h.Set("X-Gitlab-Instance", "https://gitlab.com")
		h.Set("Idempotency-Key", delivery)
	case Bitbucket:
		h.Set("User-Agent", "Bitbucket-Webhooks/2.0")
		h.Set("X-Event-Key", event)
		h.Set("X-Request-UUID", delivery)
		h.Set("X-Hook-UUID", "{d97e4322-3e7a-42ad-ab96-af93243388ca}")
		h.Set("X-Attempt-Number", "1")
	case BitbucketServer:
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("User-Agent", "Atlassian HttpClient 4.2.0 / Bitbucket-9.4.3 (9004003) / Default")
		h.Set("X-Event-Key", event)
		h.Set("X-Request-Id", delivery)
	case AzureDevOps:
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-VSS-ActivityId", "41ceef62-8f3b-4907-99f1-597f44a5ff51")
		h.Set("X-VSS-SubscriptionId", "e4f5a6b7-c8d9-4e0f-a1b2-c3d4e5f6a7b8")
	}
	return h
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "payloads", name))
	require.NoError(t, err)
	return b
}

// editJSON decodes a JSON object, lets edit change it and encodes it again.
func editJSON(body []byte, edit func(m map[string]any)) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	edit(m)
	return json.Marshal(m)
}

func mustEditJSON(t *testing.T, body []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	b, err := editJSON(body, edit)
	require.NoError(t, err)
	return b
}

// obj walks m along keys, each naming a nested object.
func obj(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

func assertEvent(t *testing.T, want Event, got Event) {
	t.Helper()
	assert.Equal(t, want.Provider, got.Provider, "Provider")
	assert.Equal(t, want.Kind, got.Kind, "Kind")
	assert.Equal(t, want.Name, got.Name, "Name")
	assert.Equal(t, want.Delivery, got.Delivery, "Delivery")
	assert.Equal(t, want.DefaultBranch, got.DefaultBranch, "DefaultBranch")
	assert.Equal(t, want.Changes, got.Changes, "Changes")
	assert.Subset(t, got.RepoURLs, want.RepoURLs, "RepoURLs")
	assertNoDuplicates(t, got.RepoURLs)
}

func assertNoDuplicates(t *testing.T, urls []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, u := range urls {
		assert.NotEmpty(t, u, "empty RepoURL in %q", urls)
		assert.False(t, seen[u], "RepoURL %q listed twice in %q", u, urls)
		seen[u] = true
	}
}

func TestParse_Fixtures(t *testing.T) {
	for _, tc := range fixtureCases {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			want := tc.want
			want.Provider = tc.provider
			if tc.delivery != "" {
				want.Delivery = tc.delivery
			}
			ev, err := Parse(tc.provider, deliveryHeaders(tc.provider, tc.event, tc.delivery), readFixture(t, tc.file))
			require.NoError(t, err)
			assertEvent(t, want, ev)
		})
	}
}

// Every URL a payload gives must name the repository the push is for: a
// stray API or browse URL would match no GitRepo, or the wrong one.
func TestParse_RepoURLsAllNameTheRepository(t *testing.T) {
	for _, tc := range fixtureCases {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			want, err := RepoKey(tc.clone)
			require.NoError(t, err)
			ev, err := Parse(tc.provider, deliveryHeaders(tc.provider, tc.event, tc.delivery), readFixture(t, tc.file))
			require.NoError(t, err)
			require.NotEmpty(t, ev.RepoURLs)
			for _, u := range ev.RepoURLs {
				got, err := RepoKey(u)
				if assert.NoError(t, err, u) {
					assert.Equal(t, want, got, u)
				}
			}
		})
	}
}

func TestDetect(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name string
		h    http.Header
		want Provider
	}{
		{"none", hdr(), ""},
		{"unrelated headers only", hdr("Content-Type", "application/json", "User-Agent", "curl/8.5.0", "X-Request-Id", "1"), ""},
		{"github", hdr("X-GitHub-Event", "push"), GitHub},
		{"gitlab", hdr("X-Gitlab-Event", "Push Hook"), GitLab},
		{"gitea alone", hdr("X-Gitea-Event", "push"), Gitea},
		{"gitea with gogs and github headers", hdr("X-Gitea-Event", "push", "X-Gogs-Event", "push", "X-GitHub-Event", "push"), Gitea},
		{"gitea with github header", hdr("X-GitHub-Event", "push", "X-Gitea-Event", "push"), Gitea},
		{"gogs", hdr("X-Gogs-Event", "push"), Gogs},
		{"gogs before github", hdr("X-Gogs-Event", "push", "X-GitHub-Event", "push"), Gogs},
		{"bitbucket cloud by hook uuid", hdr("X-Event-Key", "repo:push", "X-Hook-UUID", "{d97e4322-3e7a-42ad-ab96-af93243388ca}"), Bitbucket},
		{"bitbucket cloud by request uuid", hdr("X-Event-Key", "repo:push", "X-Request-UUID", "241c0065-4d70-4e6e-a166-2f5a0c76fd84"), Bitbucket},
		{"bitbucket cloud full", deliveryHeaders(Bitbucket, "repo:push", "241c0065-4d70-4e6e-a166-2f5a0c76fd84"), Bitbucket},
		{"bitbucket server", hdr("X-Event-Key", "repo:refs_changed", "X-Request-Id", "53dcabf0-2ab0-4205-a8b0-88012db5f479"), BitbucketServer},
		{"bitbucket server ping", hdr("X-Event-Key", "diagnostics:ping"), BitbucketServer},
		{"azure activity id", hdr("X-VSS-ActivityId", "41ceef62-8f3b-4907-99f1-597f44a5ff51"), AzureDevOps},
		{"azure subscription id", hdr("X-VSS-SubscriptionId", "e4f5a6b7-c8d9-4e0f-a1b2-c3d4e5f6a7b8"), AzureDevOps},
		{"empty event header", hdr("X-GitHub-Event", ""), ""},
	}
	for _, p := range Providers {
		tests = append(tests, struct {
			name string
			h    http.Header
			want Provider
		}{"delivery headers of " + string(p), deliveryHeaders(p, "push", "d"), p})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Detect(tc.h))
		})
	}
}

func TestProviders(t *testing.T) {
	assert.Equal(t, []Provider{GitHub, GitLab, Gitea, Gogs, Bitbucket, BitbucketServer, AzureDevOps}, Providers)
}

func TestParse_UnknownEventsAreIgnored(t *testing.T) {
	notJSON := []byte("{this is not JSON")
	tests := []struct {
		name     string
		provider Provider
		event    string
		body     []byte
		wantName string
	}{
		{"github issues", GitHub, "issues", notJSON, "issues"},
		{"github pull_request_review", GitHub, "pull_request_review", notJSON, "pull_request_review"},
		{"github create", GitHub, "create", notJSON, "create"},
		{"gitlab note", GitLab, "Note Hook", notJSON, "Note Hook"},
		{"gitlab pipeline", GitLab, "Pipeline Hook", notJSON, "Pipeline Hook"},
		{"gitea issues", Gitea, "issues", notJSON, "issues"},
		{"gitea delete", Gitea, "delete", notJSON, "delete"},
		{"gogs create", Gogs, "create", notJSON, "create"},
		{"bitbucket pullrequest created", Bitbucket, "pullrequest:created", notJSON, "pullrequest:created"},
		{"bitbucket server pr opened", BitbucketServer, "pr:opened", notJSON, "pr:opened"},
		{
			"azure pull request created", AzureDevOps, "", []byte(`{
				"subscriptionId": "e4f5a6b7-c8d9-4e0f-a1b2-c3d4e5f6a7b8", "notificationId": 4,
				"id": "2ab4e3d3-b7a6-425e-92b1-5a9982c1269e", "eventType": "git.pullrequest.created", "publisherId": "tfs",
				"resource": {
					"repository": {
						"id": "c2d5e7f1-3a4b-4c6d-9e8f-0a1b2c3d4e5f", "name": "app",
						"url": "https://dev.azure.com/flotilla/_apis/git/repositories/c2d5e7f1-3a4b-4c6d-9e8f-0a1b2c3d4e5f",
						"project": {"id": "7e1c2b3a-4d5e-4f60-8a9b-0c1d2e3f4a5b", "name": "gitops", "state": "wellFormed", "lastUpdateTime": "0001-01-01T00:00:00"},
						"remoteUrl": "https://dev.azure.com/flotilla/gitops/_git/app"
					},
					"pullRequestId": 17, "status": "active", "createdBy": {"displayName": "Sam Okafor"},
					"creationDate": "2025-06-02T15:07:11.3617012Z", "title": "Scale web",
					"sourceRefName": "refs/heads/scale-web", "targetRefName": "refs/heads/main",
					"mergeStatus": "succeeded", "mergeId": "a10bb228-6ba6-4362-abd7-49ea21333dbd",
					"lastMergeSourceCommit": {"commitId": "53d54ac915144006c2c9e90d2c7d3880920db49c"}
				},
				"resourceVersion": "1.0", "createdDate": "2025-06-02T15:07:12.1231012Z"
			}`), "git.pullrequest.created",
		},
		{
			"azure build complete", AzureDevOps, "",
			[]byte(`{"id": "4a5d99d6-1c75-4e53-91b9-ee80057d4ce3", "eventType": "build.complete", "publisherId": "tfs",
				"resource": {"id": 2, "buildNumber": "20250602.2", "status": "completed", "result": "succeeded",
					"repository": {"id": "c2d5e7f1-3a4b-4c6d-9e8f-0a1b2c3d4e5f", "type": "TfsGit"}}}`),
			"build.complete",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Parse(tc.provider, deliveryHeaders(tc.provider, tc.event, "6d1f2a3b-0000-4000-8000-000000000001"), tc.body)
			require.NoError(t, err)
			assert.Equal(t, Unknown, ev.Kind)
			assert.Equal(t, tc.provider, ev.Provider)
			assert.Equal(t, tc.wantName, ev.Name)
			assert.Empty(t, ev.Changes)
		})
	}
}

// pushCase names, per provider, the fixture of a push and how to strip
// it of its repository or of its ref.
var pushCases = []struct {
	provider  Provider
	event     string
	file      string
	dropRepo  func(m map[string]any)
	dropRef   func(m map[string]any)
	wrongType func(m map[string]any) // a string field given a number
}{
	{
		GitHub, "push", "github-push.json",
		func(m map[string]any) { delete(m, "repository") },
		func(m map[string]any) { delete(m, "ref") },
		func(m map[string]any) { m["ref"] = 42 },
	},
	{
		GitLab, "Push Hook", "gitlab-push.json",
		func(m map[string]any) { delete(m, "project"); delete(m, "repository") },
		func(m map[string]any) { delete(m, "ref") },
		func(m map[string]any) { m["after"] = 42 },
	},
	{
		Gitea, "push", "gitea-push.json",
		func(m map[string]any) { delete(m, "repository") },
		func(m map[string]any) { delete(m, "ref") },
		func(m map[string]any) { obj(m, "repository")["clone_url"] = 42 },
	},
	{
		Gogs, "push", "gogs-push.json",
		func(m map[string]any) { delete(m, "repository") },
		func(m map[string]any) { delete(m, "ref") },
		func(m map[string]any) { m["after"] = 42 },
	},
	{
		Bitbucket, "repo:push", "bitbucket-push.json",
		func(m map[string]any) { delete(m, "repository") },
		func(m map[string]any) { obj(m, "push")["changes"] = []any{} },
		func(m map[string]any) {
			change := obj(m, "push")["changes"].([]any)[0].(map[string]any)
			obj(change, "new", "target")["hash"] = 42
		},
	},
	{
		BitbucketServer, "repo:refs_changed", "bitbucket-server-push.json",
		func(m map[string]any) { delete(m, "repository") },
		func(m map[string]any) { delete(m, "changes") },
		func(m map[string]any) { m["changes"].([]any)[0].(map[string]any)["toHash"] = 42 },
	},
	{
		AzureDevOps, "", "azure-devops-push.json",
		func(m map[string]any) { delete(obj(m, "resource"), "repository") },
		func(m map[string]any) { delete(obj(m, "resource"), "refUpdates") },
		func(m map[string]any) { obj(m, "resource", "repository")["remoteUrl"] = 42 },
	},
}

func TestParse_Malformed(t *testing.T) {
	for _, pc := range pushCases {
		fixture := readFixture(t, pc.file)
		bodies := map[string][]byte{
			"not JSON":         []byte("{this is not JSON"),
			"empty body":       nil,
			"truncated":        fixture[:len(fixture)/2],
			"JSON array":       []byte(`[]`),
			"JSON string":      []byte(`"push"`),
			"no repository":    mustEditJSON(t, fixture, pc.dropRepo),
			"no ref":           mustEditJSON(t, fixture, pc.dropRef),
			"number for field": mustEditJSON(t, fixture, pc.wrongType),
		}
		if pc.provider != AzureDevOps {
			// The headers say push; a body that is no push is malformed.
			bodies["empty object"] = []byte(`{}`)
			bodies["null"] = []byte(`null`)
		}
		for name, body := range bodies {
			t.Run(string(pc.provider)+"/"+name, func(t *testing.T) {
				ev, err := Parse(pc.provider, deliveryHeaders(pc.provider, pc.event, "6d1f2a3b-0000-4000-8000-000000000002"), body)
				require.Error(t, err, "parsed as %+v", ev)
				assert.True(t, errors.Is(err, ErrMalformed), "%v does not wrap ErrMalformed", err)
			})
		}
	}
}

func TestParse_GitHubFormEncoded(t *testing.T) {
	for _, tc := range fixtureCases {
		if tc.provider != GitHub {
			continue
		}
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			body := readFixture(t, tc.file)
			h := deliveryHeaders(GitHub, tc.event, tc.delivery)
			want, err := Parse(GitHub, h, body)
			require.NoError(t, err)

			h.Set("Content-Type", "application/x-www-form-urlencoded")
			form := []byte(url.Values{"payload": {string(body)}}.Encode())
			got, err := Parse(GitHub, h, form)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
	t.Run("no payload field", func(t *testing.T) {
		h := deliveryHeaders(GitHub, "push", "6d1f2a3b-0000-4000-8000-000000000003")
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		_, err := Parse(GitHub, h, []byte("ref=refs%2Fheads%2Fmain"))
		assert.True(t, errors.Is(err, ErrMalformed), "%v", err)
	})
	t.Run("payload not JSON", func(t *testing.T) {
		h := deliveryHeaders(GitHub, "push", "6d1f2a3b-0000-4000-8000-000000000004")
		h.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		_, err := Parse(GitHub, h, []byte("payload=%7Bnope"))
		assert.True(t, errors.Is(err, ErrMalformed), "%v", err)
	})
}

// Hosts retype fields Flotilla does not read (go-playground/webhooks#197:
// Gitea's created_at is an RFC 3339 string where GitHub's is a number).
// None of that may break a push.
func TestParse_IgnoresTypesOfUnusedFields(t *testing.T) {
	tests := []struct {
		name     string
		provider Provider
		event    string
		file     string
		edit     func(m map[string]any)
	}{
		{"gitea string created_at", Gitea, "push", "gitea-push.json", func(m map[string]any) {
			obj(m, "repository")["created_at"] = "2024-11-08T14:22:31+01:00"
		}},
		{"gitea numeric created_at", Gitea, "push", "gitea-push.json", func(m map[string]any) {
			obj(m, "repository")["created_at"] = 1731072151
		}},
		{"github string created_at", GitHub, "push", "github-push.json", func(m map[string]any) {
			obj(m, "repository")["created_at"] = "2024-06-07T13:55:42Z"
			obj(m, "repository")["pushed_at"] = "2025-06-02T09:15:07Z"
		}},
		{"github commit timestamps without zone", GitHub, "push", "github-push.json", func(m map[string]any) {
			obj(m, "head_commit")["timestamp"] = "2025-06-02T11:15:02"
		}},
		{"gogs object where a string was", Gogs, "push", "gogs-push.json", func(m map[string]any) {
			obj(m, "repository")["website"] = map[string]any{"href": "https://example.com"}
		}},
		{"azure lastUpdateTime without zone", AzureDevOps, "", "azure-devops-push.json", func(m map[string]any) {
			obj(m, "resource", "repository", "project")["lastUpdateTime"] = "2025-06-02T14:02:33.52"
			obj(m, "resource")["date"] = "2025-06-02T14:02:31.6452137"
		}},
		{"bitbucket server date without colon in zone", BitbucketServer, "repo:refs_changed", "bitbucket-server-push.json", func(m map[string]any) {
			m["date"] = "2025-06-02T15:25:14+0200"
			m["toCommit"] = nil
		}},
		{"bitbucket cloud null website and parent", Bitbucket, "repo:push", "bitbucket-push.json", func(m map[string]any) {
			obj(m, "repository")["website"] = nil
			obj(m, "repository")["parent"] = nil
		}},
		{"gitlab numeric ref_protected and null message", GitLab, "Push Hook", "gitlab-push.json", func(m map[string]any) {
			m["ref_protected"] = 1
			m["message"] = nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := deliveryHeaders(tc.provider, tc.event, "6d1f2a3b-0000-4000-8000-000000000005")
			want, err := Parse(tc.provider, h, readFixture(t, tc.file))
			require.NoError(t, err)
			got, err := Parse(tc.provider, h, mustEditJSON(t, readFixture(t, tc.file), tc.edit))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestParse_Deletions(t *testing.T) {
	tests := []struct {
		name     string
		provider Provider
		event    string
		file     string
		edit     func(m map[string]any)
		want     []Change
	}{
		{
			"gitlab branch delete, checkout_sha null", GitLab, "Push Hook", "gitlab-push.json",
			func(m map[string]any) {
				m["ref"], m["before"], m["after"], m["checkout_sha"] = "refs/heads/feature/canary", "a396c80e2c85be7becbbdded6c85eacad68db717", zeros, nil
				m["commits"], m["total_commits_count"] = []any{}, 0
			},
			[]Change{{Ref: "refs/heads/feature/canary", Deleted: true}},
		},
		{
			"gitlab tag delete", GitLab, "Tag Push Hook", "gitlab-tag-push.json",
			func(m map[string]any) {
				m["before"], m["after"], m["checkout_sha"] = "2370c225288e9433a3722c1288720d22fb245962", zeros, nil
			},
			[]Change{{Ref: "refs/tags/v1.0.0", Deleted: true}},
		},
		{
			"github delete flag with zero after", GitHub, "push", "github-push-delete.json", nil,
			[]Change{{Ref: "refs/heads/feature/canary", Deleted: true}},
		},
		{
			"gitea all-zero after", Gitea, "push", "gitea-push.json",
			func(m map[string]any) {
				m["ref"], m["after"], m["commits"], m["head_commit"] = "refs/heads/feature/canary", zeros, []any{}, nil
			},
			[]Change{{Ref: "refs/heads/feature/canary", Deleted: true}},
		},
		{
			"bitbucket cloud branch closed", Bitbucket, "repo:push", "bitbucket-push.json",
			func(m map[string]any) {
				changes := obj(m, "push")["changes"].([]any)
				first := changes[0].(map[string]any)
				first["new"], first["closed"], first["commits"] = nil, true, []any{}
				obj(first, "old")["name"] = "feature/canary"
				m["push"].(map[string]any)["changes"] = changes[:1]
			},
			[]Change{{Ref: "refs/heads/feature/canary", Deleted: true}},
		},
		{
			"bitbucket cloud tag deleted", Bitbucket, "repo:push", "bitbucket-push.json",
			func(m map[string]any) {
				changes := obj(m, "push")["changes"].([]any)
				tag := changes[1].(map[string]any)
				tag["old"], tag["new"], tag["closed"], tag["created"] = tag["new"], nil, true, false
				m["push"].(map[string]any)["changes"] = changes[1:]
			},
			[]Change{{Ref: "refs/tags/v1.0.0", Deleted: true}},
		},
		{
			"azure branch delete", AzureDevOps, "", "azure-devops-push.json",
			func(m map[string]any) {
				obj(m, "resource")["refUpdates"] = []any{map[string]any{
					"name": "refs/heads/feature/canary", "oldObjectId": "4817d74e79c6d3936ef054da3bc6cb7f3d9db5a5", "newObjectId": zeros,
				}}
				obj(m, "resource")["commits"] = []any{}
			},
			[]Change{{Ref: "refs/heads/feature/canary", Deleted: true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := readFixture(t, tc.file)
			if tc.edit != nil {
				body = mustEditJSON(t, body, tc.edit)
			}
			ev, err := Parse(tc.provider, deliveryHeaders(tc.provider, tc.event, "6d1f2a3b-0000-4000-8000-000000000006"), body)
			require.NoError(t, err)
			assert.Equal(t, Push, ev.Kind)
			assert.Equal(t, tc.want, ev.Changes)
			assert.NotEmpty(t, ev.RepoURLs)
		})
	}
}

func TestParse_Pings(t *testing.T) {
	t.Run("github organization hook has no repository", func(t *testing.T) {
		body := mustEditJSON(t, readFixture(t, "github-ping.json"), func(m map[string]any) {
			delete(m, "repository")
			obj(m, "hook")["type"] = "Organization"
			m["organization"] = map[string]any{"login": "flotilla-gitops", "id": 171223400}
		})
		ev, err := Parse(GitHub, deliveryHeaders(GitHub, "ping", "6d1f2a3b-0000-4000-8000-000000000007"), body)
		require.NoError(t, err)
		assert.Equal(t, Ping, ev.Kind)
		assert.Equal(t, "ping", ev.Name)
		assert.Equal(t, "6d1f2a3b-0000-4000-8000-000000000007", ev.Delivery)
		assert.Empty(t, ev.RepoURLs)
		assert.Empty(t, ev.Changes)
	})
	t.Run("bitbucket server diagnostics", func(t *testing.T) {
		ev, err := Parse(BitbucketServer, deliveryHeaders(BitbucketServer, "diagnostics:ping", "6d1f2a3b-0000-4000-8000-000000000008"), []byte(`{"test": true}`))
		require.NoError(t, err)
		assert.Equal(t, Ping, ev.Kind)
		assert.Equal(t, "diagnostics:ping", ev.Name)
		assert.Equal(t, "6d1f2a3b-0000-4000-8000-000000000008", ev.Delivery)
		assert.Empty(t, ev.Changes)
	})
}

func TestParse_GiteaDeliveryFromItsOwnHeader(t *testing.T) {
	h := deliveryHeaders(Gitea, "push", "a02902f4-c3a8-4ac4-8178-5e20dc0de265")
	h.Set("X-GitHub-Delivery", "00000000-0000-4000-8000-00000000dead")
	ev, err := Parse(Gitea, h, readFixture(t, "gitea-push.json"))
	require.NoError(t, err)
	assert.Equal(t, "a02902f4-c3a8-4ac4-8178-5e20dc0de265", ev.Delivery)
}

// Commit IDs are compared as strings elsewhere, so they must come out in
// one case whatever the payload sent.
func TestParse_CommitIsLowerCase(t *testing.T) {
	body := mustEditJSON(t, readFixture(t, "bitbucket-server-push.json"), func(m map[string]any) {
		m["changes"].([]any)[0].(map[string]any)["toHash"] = strings.ToUpper("96a4b6d09cf22c52530dc488965c55ea6c9c6f87")
	})
	ev, err := Parse(BitbucketServer, deliveryHeaders(BitbucketServer, "repo:refs_changed", "6d1f2a3b-0000-4000-8000-000000000009"), body)
	require.NoError(t, err)
	require.NotEmpty(t, ev.Changes)
	assert.Equal(t, "96a4b6d09cf22c52530dc488965c55ea6c9c6f87", ev.Changes[0].Commit)
}

// GitLab's "after" of an annotated tag is the tag object; checkout_sha is
// the commit. A ref without a name is malformed.
func TestParse_GitLabAnnotatedTagAndEmptyRefName(t *testing.T) {
	h := http.Header{"X-Gitlab-Event": {"Tag Push Hook"}}
	body := `{"object_kind":"tag_push","ref":"refs/tags/v2","after":"` + strings.Repeat("a", 40) +
		`","checkout_sha":"` + strings.Repeat("b", 40) + `","project":{"git_http_url":"https://gitlab.com/o/app.git"}}`
	ev, err := Parse(GitLab, h, []byte(body))
	require.NoError(t, err)
	assert.Equal(t, []Change{{Ref: "refs/tags/v2", Commit: strings.Repeat("b", 40)}}, ev.Changes)

	h = http.Header{"X-Event-Key": {"repo:push"}, "X-Hook-Uuid": {"u"}}
	body = `{"push":{"changes":[{"new":{"type":"branch","name":"","target":{"hash":"` + strings.Repeat("c", 40) +
		`"}}}]},"repository":{"full_name":"o/app"}}`
	_, err = Parse(Bitbucket, h, []byte(body))
	require.ErrorIs(t, err, ErrMalformed)
}
