package plan_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/plan"
)

func upgraded(diff string) plan.Release {
	return plan.Release{Bundle: "app-web", Release: "web", Namespace: "apps", Action: plan.Upgrade,
		From: "s-1111111111111111", To: "s-2222222222222222", Objects: []plan.Object{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Change: plan.Update, Diff: diff},
			{APIVersion: "v1", Kind: "Service", Namespace: "apps", Name: "web", Change: plan.NoChange},
		}}
}

func TestMarkdown(t *testing.T) {
	const diff = "--- live\n+++ planned\n-  replicas: 1\n+  replicas: 3\n"
	tests := []struct {
		name    string
		in      plan.Result
		max     int
		want    []string // substrings, in order
		notWant []string
	}{
		{
			name: "upgrade with diff",
			in: plan.Result{GitRepo: "ns/app", Commit: "0123456789abcdef0123", Source: "pull request #7",
				Clusters: []plan.Cluster{{Name: "c1", Releases: []plan.Release{upgraded(diff)}}}},
			want: []string{"### Flotilla plan for `ns/app` at `0123456789ab` (pull request #7)", "**1 upgrade on 1 cluster(s)**",
				"#### Cluster `c1`", "| Bundle | Release | Action | From → To |",
				"| `app-web` | `apps/web` | upgrade | `s-1111111111` → `s-2222222222` |",
				"<details><summary>app-web: update Deployment apps/web</summary>", "```diff\n" + diff + "```\n", "</details>"},
			notWant: []string{"Service apps/web", "truncated", "offline"},
		},
		{
			name: "no changes",
			in: plan.Result{GitRepo: "ns/app", Commit: "abc", Clusters: []plan.Cluster{{Name: "c1", Releases: []plan.Release{
				{Bundle: "b", Release: "b", Namespace: "d", Action: plan.Unchanged, From: "s-1", To: "s-1"}}}}},
			want:    []string{"**1 unchanged on 1 cluster(s)**", "| `b` | `d/b` | unchanged | `s-1` → `s-1` |"},
			notWant: []string{"<details>"},
		},
		{
			name: "install, uninstall, offline cluster and errors",
			in: plan.Result{GitRepo: "ns/app", Commit: "abc", Warnings: []string{"fleet.yaml: unknown key foo"}, Clusters: []plan.Cluster{
				{Name: "edge", Offline: true, Reason: "dial tcp: connection refused", Releases: []plan.Release{
					{Bundle: "new", Release: "new", Namespace: "d", Action: plan.Install, To: "s-9"},
					{Bundle: "old", Release: "old", Namespace: "d", Action: plan.Uninstall, From: "s-8"}}},
				{Name: "prod", Releases: []plan.Release{{Bundle: "x", Release: "x", Namespace: "d", Action: plan.Upgrade,
					Error: "values | broken", Objects: []plan.Object{{Kind: "Job", Namespace: "d", Name: "j", Change: plan.Update,
						Error: "spec.template: field is immutable"}}}}},
				{Name: "gone", Error: "no kubeconfig"},
			}},
			want: []string{"offline: edge", "> ⚠️ fleet.yaml: unknown key foo", "#### Cluster `edge` — offline",
				"> 📴 not reachable", "(dial tcp: connection refused)", "| `new` | `d/new` | install | — → `s-9` |",
				"| `old` | `d/old` | uninstall | `s-8` → — |", "#### Cluster `prod`", `❌ values \| broken`,
				"x: update Job d/j", "> ❌ spec.template: field is immutable", "#### Cluster `gone`", "> ❌ no kubeconfig"},
		},
		{
			name: "a diff holding a fence gets a longer one",
			in: plan.Result{GitRepo: "ns/app", Commit: "abc", Clusters: []plan.Cluster{{Name: "c1", Releases: []plan.Release{
				upgraded("+ note: |\n+   ```sh\n+   run\n+   ```\n")}}}},
			want: []string{"````diff\n+ note: |", "+   ```\n````\n"},
		},
		{
			name: "no clusters",
			in:   plan.Result{GitRepo: "ns/app", Commit: "abc"},
			want: []string{"nothing to do on 0 cluster(s)", "The GitRepo targets no cluster."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.Markdown(tt.in, tt.max)
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if !assert.GreaterOrEqual(t, i, 0, "%q missing (or out of order) in:\n%s", w, got) {
					return
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tt.notWant {
				assert.NotContains(t, got, w)
			}
		})
	}
}

func TestMarkdown_Truncated(t *testing.T) {
	big := strings.Repeat("+  line: "+strings.Repeat("x", 80)+"\n", 200) // ≈18 KB a diff
	r := plan.Result{GitRepo: "ns/app", Commit: "0123456789abcdef"}
	for _, c := range []string{"a", "b", "c", "d", "e"} {
		r.Clusters = append(r.Clusters, plan.Cluster{Name: c, Releases: []plan.Release{upgraded(big)}})
	}
	full := plan.Markdown(r, 0)
	assert.Greater(t, len(full), plan.GitHubCommentLimit)
	assert.Equal(t, full, plan.Markdown(r, len(full)), "a plan that fits is not cut")

	for _, limit := range []int{plan.GitHubCommentLimit, 20000, 500} {
		got := plan.Markdown(r, limit)
		assert.LessOrEqual(t, len(got), limit)
		assert.Contains(t, got, "left out", "limit %d: the cut is said", limit)
		assert.Equal(t, strings.Count(got, "<details>"), strings.Count(got, "</details>"), "limit %d: no block left open", limit)
		assert.Equal(t, 0, strings.Count(got, "```")%2, "limit %d: no fence left open", limit)
	}
	assert.Contains(t, plan.Markdown(r, plan.GitHubCommentLimit), "flotilla plan app --commit 0123456789abcdef")
	assert.LessOrEqual(t, len(plan.Markdown(r, 40)), 40, "even a limit below the note is kept")
}
