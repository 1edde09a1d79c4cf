package chartfetch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
)

func TestBuildDependencies(t *testing.T) {
	repoDir := makeRepo(t, "")
	srv := newFileServer(t, repoDir, "", "")
	f := &Fetcher{Mirrors: map[string]string{"https://charts.example.com/stable": srv.URL}}
	files, err := readChartDir("testdata/parent")
	require.NoError(t, err)
	var asked []string
	local := func(p string) ([]File, error) {
		asked = append(asked, p)
		return readChartDir(filepath.Join("testdata/parent", filepath.FromSlash(p)))
	}
	ctx := context.Background()

	out, err := f.BuildDependencies(ctx, files, local)
	require.NoError(t, err)
	assert.Equal(t, []string{"../sibling"}, asked)
	names := fileNames(out)
	assert.IsNonDecreasing(t, names)
	assert.Contains(t, names, "charts/mychart-0.2.0.tgz", "0.x resolves to 0.2.0")
	assert.Contains(t, names, "charts/sibling-0.3.1.tgz")
	assert.Contains(t, names, "charts/vendored/Chart.yaml")
	assert.NotContains(t, names, "charts/vendored-1.2.0.tgz", "a vendored directory is not downloaded")
	assert.Len(t, out, len(files)+2)
	assert.Equal(t, 1, srv.count(".tgz"))

	// The remote dependency is the repository's archive, byte for byte.
	remote := fileData(out, "charts/mychart-0.2.0.tgz")
	want, err := os.ReadFile(filepath.Join(repoDir, "mychart-0.2.0.tgz"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, remote))

	// The local dependency is packed without what .helmignore excludes,
	// and the same way every time.
	sib := fileData(out, "charts/sibling-0.3.1.tgz")
	sibFiles, err := untar(sib, DefaultMaxUnpackedSize)
	require.NoError(t, err)
	assert.Equal(t, []string{"sibling/.helmignore", "sibling/Chart.yaml", "sibling/templates/configmap.yaml", "sibling/values.yaml"}, fileNames(sibFiles))
	out2, err := (&Fetcher{Mirrors: f.Mirrors}).BuildDependencies(ctx, files, local)
	require.NoError(t, err)
	assert.Equal(t, sib, fileData(out2, "charts/sibling-0.3.1.tgz"), "packing is reproducible")

	// The whole chart loads in Helm with its dependencies.
	ch, err := loader.LoadFiles(bufferedFiles(out))
	require.NoError(t, err)
	var deps []string
	for _, d := range ch.Dependencies() {
		deps = append(deps, d.Name()+"-"+d.Metadata.Version)
	}
	assert.ElementsMatch(t, []string{"mychart-0.2.0", "sibling-0.3.1", "vendored-1.2.0"}, deps)

	// Now vendored: nothing is fetched again.
	before := srv.total()
	asked = nil
	again, err := f.BuildDependencies(ctx, out, local)
	require.NoError(t, err)
	assert.Equal(t, out, again)
	assert.Equal(t, before, srv.total())
	assert.Empty(t, asked)
}

func TestBuildDependenciesErrors(t *testing.T) {
	srv := newFileServer(t, makeRepo(t, ""), "", "")
	f := &Fetcher{}
	ctx := context.Background()
	chart := func(deps string) []File {
		return []File{{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: c\nversion: 1.0.0\ndependencies:\n" + deps)}}
	}

	_, err := f.BuildDependencies(ctx, chart("- name: mychart\n  repository: '@stable'\n"), nil)
	require.ErrorIs(t, err, ErrUnsupportedSource)
	assert.Contains(t, err.Error(), `"mychart"`)

	_, err = f.BuildDependencies(ctx, chart("- name: mychart\n  repository: alias:stable\n"), nil)
	require.ErrorIs(t, err, ErrUnsupportedSource)

	_, err = f.BuildDependencies(ctx, chart("- name: mychart\n  version: '>=5'\n  repository: "+srv.URL+"\n"), nil)
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "1.0.0, 0.2.0, 0.1.0")

	_, err = f.BuildDependencies(ctx, chart("- name: missing\n  version: 1.0.0\n"), nil)
	require.ErrorIs(t, err, ErrNotFound)

	// A vendored archive of a matching version satisfies the dependency;
	// one of another version does not.
	vendored := append(chart("- name: mychart\n  version: ^0.2\n  repository: "+srv.URL+"\n"),
		File{Name: "charts/mychart-0.2.5.tgz", Data: []byte("vendored")})
	before := srv.total()
	out, err := f.BuildDependencies(ctx, vendored, nil)
	require.NoError(t, err)
	assert.Equal(t, vendored, out)
	assert.Equal(t, before, srv.total())
	vendored[1].Name = "charts/mychart-0.1.0.tgz"
	out, err = f.BuildDependencies(ctx, vendored, nil)
	require.NoError(t, err)
	assert.Contains(t, fileNames(out), "charts/mychart-0.2.0.tgz")

	// A v1 chart lists its dependencies in requirements.yaml, and a lock
	// file pins the version.
	v1 := []File{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v1\nname: old\nversion: 1.0.0\n")},
		{Name: "requirements.yaml", Data: []byte("dependencies:\n- name: mychart\n  version: '*'\n  repository: " + srv.URL + "\n")},
		{Name: "requirements.lock", Data: []byte("dependencies:\n- name: mychart\n  version: 0.1.0\n  repository: " + srv.URL + "\n")},
	}
	out, err = f.BuildDependencies(ctx, v1, nil)
	require.NoError(t, err)
	assert.Contains(t, fileNames(out), "charts/mychart-0.1.0.tgz")

	// A local chart must match the version asked for.
	_, err = f.BuildDependencies(ctx, chart("- name: sibling\n  version: ^1\n  repository: file://../sibling\n"),
		func(p string) ([]File, error) { return readChartDir(filepath.Join("testdata/parent", p)) })
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "0.3.1")
}

func bufferedFiles(files []File) []*loader.BufferedFile {
	out := make([]*loader.BufferedFile, len(files))
	for i, f := range files {
		out[i] = &loader.BufferedFile{Name: f.Name, Data: f.Data}
	}
	return out
}
