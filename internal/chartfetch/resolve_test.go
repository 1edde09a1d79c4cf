package chartfetch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/repo"
)

func TestResolveVersion(t *testing.T) {
	ctx := context.Background()
	srv := newFileServer(t, makeRepo(t, ""), "u", "p")
	host := newOCIRegistry(t)
	f := &Fetcher{IndexTTL: -1, Auth: func(url string) *Auth {
		if url == srv.URL {
			return &Auth{Username: "u", Password: "p"}
		}
		return &Auth{PlainHTTP: true}
	}}
	for _, tc := range []struct {
		src  Source
		want string
	}{
		{Source{Chart: "mychart", Repo: srv.URL, Version: "~0.1"}, "0.1.0"},
		{Source{Chart: "mychart", Repo: srv.URL, Version: "0.x"}, "0.2.0"},
		{Source{Chart: "mychart", Repo: srv.URL}, "1.0.0"},
		{Source{Chart: "mychart", Repo: srv.URL, Version: "0.2.0"}, "0.2.0"},
		{Source{Chart: "mychart", Repo: "oci://" + host + "/charts", Version: "<1"}, "0.2.0"},
		{Source{Chart: "oci://" + host + "/charts/mychart", Version: "~1"}, "1.0.0"},
		{Source{Chart: "oci://" + host + "/charts/mychart:0.1.0"}, "0.1.0"},
		{Source{Chart: srv.URL + "/mychart-0.1.0.tgz"}, ""},
	} {
		got, err := f.ResolveVersion(ctx, tc.src)
		require.NoError(t, err, "%+v", tc.src)
		assert.Equal(t, tc.want, got, "%+v", tc.src)
	}
	assert.Zero(t, srv.count(".tgz"), "resolving downloads no chart")
	exact := srv.count("index.yaml")
	_, err := f.ResolveVersion(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "1.0.0"})
	require.NoError(t, err)
	assert.Equal(t, exact, srv.count("index.yaml"), "an exact version asks nothing")

	_, err = f.ResolveVersion(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: ">=2"})
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "available")

	wrong := &Fetcher{IndexTTL: -1, Auth: func(string) *Auth { return &Auth{Username: "u", Password: "wrong"} }}
	_, err = wrong.ResolveVersion(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "~1"})
	require.ErrorIs(t, err, ErrAuth)
	assert.NotContains(t, err.Error(), "wrong")
}

// An exact version published after the index was cached (a HelmOp
// resolved it against the fresh index) is fetched: the stale cached index
// is downloaded again once.
func TestFetchExactVersionRefreshesStaleIndex(t *testing.T) {
	ctx := context.Background()
	dir := makeRepo(t, "")
	srv := newFileServer(t, dir, "", "")
	f := &Fetcher{CacheDir: t.TempDir()}
	ch, err := f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "~1"})
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", ch.Version)

	packageChart(t, "mychart", "1.1.0", dir)
	idx, err := repo.IndexDirectory(dir, "")
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))

	ch, err = f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "1.1.0"})
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", ch.Version)
	assert.Equal(t, 2, srv.count("/index.yaml"))
	_, err = f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "9.0.0"})
	require.ErrorIs(t, err, ErrNotFound)
}
