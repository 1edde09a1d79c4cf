package chartfetch

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func TestFleetExamples(t *testing.T) {
	// The fleet-examples fixture charts, laid out by URL path.
	fleetExamplesDir := testenv.SharedDir(t, "fleet-examples-charts")
	srv := newFileServer(t, fleetExamplesDir, "", "")
	f := &Fetcher{
		CacheDir: t.TempDir(),
		Mirrors: map[string]string{
			"https://github.com":        srv.URL + "/github.com",
			"https://charts.rancher.io": srv.URL + "/charts.rancher.io",
		},
	}
	ctx := context.Background()

	guestbook := Source{Chart: "https://github.com/rancher/fleet-examples/releases/download/example/guestbook-0.0.1.tgz"}
	assert.Equal(t, "ce648b1a536ac8c844ef58f2c3383e621a823acb2be15fa4b0d1cf053709a787", Checksum(guestbook))
	ch, err := f.Fetch(ctx, guestbook)
	require.NoError(t, err)
	assert.Equal(t, "guestbook", ch.Name)
	assert.Equal(t, "0.0.1", ch.Version)
	names := fileNames(ch.Files)
	assert.Contains(t, names, "guestbook/Chart.yaml")
	assert.Contains(t, names, "guestbook/values.yaml")
	assert.Contains(t, names, "guestbook/templates/frontend-deployment.yaml")
	assert.Len(t, names, 8)

	crd := Source{Chart: "rancher-monitoring-crd", Repo: "https://charts.rancher.io", Version: "104.1.0+up57.0.3"}
	ch, err = f.Fetch(ctx, crd)
	require.NoError(t, err)
	assert.Equal(t, "rancher-monitoring-crd", ch.Name)
	assert.Equal(t, "104.1.0+up57.0.3", ch.Version)
	assert.Equal(t, "sha256:fbc68b8f83a5e0b85b8bb55c3b36dd451c6dd049fee23f49c10917134a0e1210", ch.Digest, "the digest listed in index.yaml")
	names = fileNames(ch.Files)
	assert.Contains(t, names, "rancher-monitoring-crd/Chart.yaml")
	assert.Contains(t, names, "rancher-monitoring-crd/README.md")
	assert.Contains(t, names, "rancher-monitoring-crd/files/crd-manifest.tgz")

	// rancher-monitoring vendors its file:// dependencies as directories
	// under charts/, so building dependencies fetches nothing.
	mon, err := f.Fetch(ctx, Source{Chart: "rancher-monitoring", Repo: "https://charts.rancher.io/", Version: "104.1.0+up57.0.3"})
	require.NoError(t, err)
	var root []File
	for _, file := range mon.Files {
		root = append(root, File{Name: strings.TrimPrefix(file.Name, "rancher-monitoring/"), Data: file.Data})
	}
	before := srv.total()
	out, err := f.BuildDependencies(ctx, root, func(p string) ([]File, error) {
		t.Errorf("local chart %s read although vendored", p)
		return nil, os.ErrNotExist
	})
	require.NoError(t, err)
	assert.Equal(t, root, out)
	assert.Equal(t, before, srv.total())
}
