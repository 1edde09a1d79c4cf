package gitsource

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func TestInputRules_TouchedBy(t *testing.T) {
	tests := []struct {
		name    string
		in      Inputs
		extra   []string // prefixes found in reference files
		changed []string
		want    bool
	}{
		{name: "whole repository", in: Inputs{Paths: []string{"."}}, changed: []string{"x/y.yaml"}, want: true},
		{name: "no paths is the whole repository", changed: []string{"README.md"}, want: true},
		{name: "file under path", in: Inputs{Paths: []string{"apps/a"}}, changed: []string{"apps/a/cm.yaml"}, want: true},
		{name: "leading slash", in: Inputs{Paths: []string{"/apps/a/"}}, changed: []string{"apps/a/cm.yaml"}, want: true},
		{name: "other path", in: Inputs{Paths: []string{"apps/a"}}, changed: []string{"apps/b/cm.yaml", "README.md"}},
		{name: "sibling with the path as name prefix", in: Inputs{Paths: []string{"apps/a"}}, changed: []string{"apps/ab/cm.yaml"}},
		{name: "glob matches a new directory", in: Inputs{Paths: []string{"apps/*"}}, changed: []string{"apps/new/fleet.yaml"}, want: true},
		{name: "glob does not match a file beside", in: Inputs{Paths: []string{"apps/*/base"}}, changed: []string{"apps/x/overlay/cm.yaml"}},
		{name: "glob deep match", in: Inputs{Paths: []string{"apps/*/base"}}, changed: []string{"apps/x/base/sub/cm.yaml"}, want: true},
		{name: "file named like the glob's parent", in: Inputs{Paths: []string{"apps/*"}}, changed: []string{"apps"}},
		{name: "malformed glob matches nothing", in: Inputs{Paths: []string{"apps/["}}, changed: []string{"apps/x"}},
		{name: "referenced values file", in: Inputs{Paths: []string{"a"}}, extra: []string{"shared/values.yaml"},
			changed: []string{"shared/values.yaml"}, want: true},
		{name: "file beside a referenced file", in: Inputs{Paths: []string{"a"}}, extra: []string{"shared/values.yaml"},
			changed: []string{"shared/other.yaml"}},
		{name: "referenced directory", in: Inputs{Paths: []string{"a"}}, extra: []string{"base"}, changed: []string{"base/deploy.yaml"}, want: true},
		{name: "any .fleetignore", in: Inputs{Paths: []string{"a"}}, changed: []string{".fleetignore"}, want: true},
		{name: "nested .fleetignore elsewhere", in: Inputs{Paths: []string{"a"}}, changed: []string{"b/.fleetignore"}, want: true},
		{name: "bundle base", in: Inputs{Bundles: []api.BundlePath{{Base: "b1"}}}, changed: []string{"b1/x.yaml"}, want: true},
		{name: "bundle options file relative to base", in: Inputs{Bundles: []api.BundlePath{{Base: "b1", Options: "../opts/b1.yaml"}}},
			changed: []string{"opts/b1.yaml"}, want: true},
		{name: "bundle options file from root", in: Inputs{Bundles: []api.BundlePath{{Base: "b1", Options: "opts/b1.yaml"}}},
			changed: []string{"opts/b1.yaml"}, want: true},
		{name: "bundles without paths read only their bases", in: Inputs{Bundles: []api.BundlePath{{Base: "b1"}}}, changed: []string{"b2/x.yaml"}},
		{name: "no changes", in: Inputs{Paths: []string{"."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := rulesOf(tt.in)
			rules.prefixes = append(rules.prefixes, tt.extra...)
			assert.Equal(t, tt.want, rules.touchedBy(tt.changed))
		})
	}
}

func TestReferenceCandidates(t *testing.T) {
	tests := map[string][]string{
		"../shared/values.yaml":            {"../shared/values.yaml"},
		"file://../common":                 {"../common"},
		"config=../cfg/app.properties":     {"config=../cfg/app.properties", "../cfg/app.properties"},
		"https://charts.example.com":       nil,
		"oci://registry/chart":             nil,
		"github.com/org/repo//base?ref=v1": {"github.com/org/repo//base?ref=v1", "v1"}, // over-reading is harmless
		"  ":                               nil,
		"multi\nline":                      nil,
	}
	for in, want := range tests {
		assert.Equal(t, want, referenceCandidates(in), in)
	}
}

// TestCache_Touches compares real commits: what each GitRepo of a
// monorepo reads, references outside its path included.
func TestCache_Touches(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "mono", map[string]string{
		"a/fleet.yaml":                 "helm:\n  valuesFiles:\n  - ../shared/a-values.yaml\n",
		"a/cm.yaml":                    "kind: ConfigMap",
		"b/cm.yaml":                    "kind: ConfigMap",
		"k/kustomization.yaml":         "resources:\n- ../bases/web\n",
		"bases/web/kustomization.yaml": "resources:\n- deploy.yaml\n- ../../components/db\n",
		"bases/web/deploy.yaml":        "kind: Deployment",
		"components/db/db.yaml":        "kind: StatefulSet",
		"shared/a-values.yaml":         "x: 1",
		"shared/other.yaml":            "y: 1",
		"broken/fleet.yaml":            "helm: [",
	})
	base := repo.Head(t)
	cache := NewCache(t.TempDir())
	r := Remote{URL: repo.URL()}
	touches := func(from, to string, paths ...string) bool {
		t.Helper()
		got, err := cache.Touches(t.Context(), r, from, to, Inputs{Paths: paths})
		require.NoError(t, err)
		return got
	}

	bCommit := repo.Commit(t, map[string]string{"b/cm.yaml": "kind: ConfigMap # 2"}, "touch b")
	assert.False(t, touches(base, bCommit, "a"), "a change under b only")
	assert.True(t, touches(base, bCommit, "b"))
	assert.True(t, touches(base, bCommit, "*"), "a glob matching b")
	assert.False(t, touches(base, bCommit, "k"))

	values := repo.Commit(t, map[string]string{"shared/a-values.yaml": "x: 2"}, "a's values")
	assert.True(t, touches(bCommit, values, "a"), "helm.valuesFiles outside the path")
	assert.False(t, touches(bCommit, values, "b"))
	assert.False(t, touches(bCommit, values, "k"))

	other := repo.Commit(t, map[string]string{"shared/other.yaml": "y: 2"}, "unreferenced")
	assert.False(t, touches(values, other, "a"), "a file beside the referenced one")

	db := repo.Commit(t, map[string]string{"components/db/db.yaml": "kind: StatefulSet # 2"}, "db")
	assert.True(t, touches(other, db, "k"), "a component of a base of the kustomization, two hops away")
	assert.False(t, touches(other, db, "a"))

	newApp := repo.Commit(t, map[string]string{"c/fleet.yaml": "namespace: c"}, "new bundle")
	assert.True(t, touches(db, newApp, "*"), "a new bundle directory under a glob")
	assert.False(t, touches(db, newApp, "a", "b"))

	ignore := repo.Commit(t, map[string]string{".fleetignore": "*.md"}, "ignore")
	assert.True(t, touches(newApp, ignore, "a"))

	assert.True(t, touches(ignore, repo.Commit(t, map[string]string{"x.txt": "1"}, "x"), "broken"),
		"an options file that does not parse: cannot be sure")
	assert.False(t, touches(ignore, ignore, "."), "the same commit changes nothing")

	// A bundles entry's options file is read like the base's fleet.yaml:
	// what it names is relative to the base, not to its own directory.
	envs := repo.Commit(t, map[string]string{
		"envs/dev.yaml":      "helm:\n  valuesFiles:\n  - ../values/dev.yaml\n",
		"values/dev.yaml":    "x: 1",
		"envs/values/x.yaml": "x: 1",
	}, "options file")
	devValues := repo.Commit(t, map[string]string{"values/dev.yaml": "x: 2"}, "dev values")
	entry := Inputs{Bundles: []api.BundlePath{{Base: "apps/web", Options: "../../envs/dev.yaml"}}}
	got, err := cache.Touches(t.Context(), r, envs, devValues, entry)
	require.NoError(t, err)
	assert.False(t, got, "apps/web/../values/dev.yaml is apps/values/dev.yaml, not values/dev.yaml")
	entry.Bundles[0] = api.BundlePath{Base: "apps", Options: "../envs/dev.yaml"}
	got, err = cache.Touches(t.Context(), r, envs, devValues, entry)
	require.NoError(t, err)
	assert.True(t, got, "base apps: ../values/dev.yaml is values/dev.yaml, which changed")

	_, err = cache.Touches(t.Context(), r, base, hashOf('f'), Inputs{Paths: []string{"a"}})
	require.ErrorIs(t, err, ErrRefNotFound, "a commit the remote does not have")
}
