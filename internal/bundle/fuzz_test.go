package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// maxFuzzInput bounds the fleet.yaml one iteration reads, so each stays
// cheap.
const maxFuzzInput = 64 << 10

// fleetYAMLSeeds returns every fleet.yaml of the package's fixtures, with
// variants cut short.
func fleetYAMLSeeds(f *testing.F) [][]byte {
	f.Helper()
	var seeds [][]byte
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (d.Name() != "fleet.yaml" && d.Name() != "fleet.yml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil {
			seeds = append(seeds, data, data[:len(data)/2])
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	return append(seeds,
		[]byte("helm:\n  chart: ./chart\n  values: {a: 1, b: [x, {c: d}]}\n  valuesFiles: [values.yaml]\ntargetCustomizations:\n- name: dev\n  clusterSelector: {matchLabels: {env: dev}}\n  helm: {values: {a: 2}}\n"),
		[]byte("defaultNamespace: app\nnamespace: app\nrolloutStrategy:\n  maxUnavailable: 10%\n  partitions: [{name: a, clusterGroup: g}, {maxUnavailable: 1}]\n  windows: [{schedule: '0 2 * * *', duration: 1h, timeZone: Europe/Berlin}]\n"),
		[]byte("name: x\nname: y\n"),
		[]byte("helm: {releaseName: 3}\n"),
		[]byte("a: &a {b: 1}\nhelm: {values: {<<: *a, c: 2}}\n"),
		[]byte("dependsOn: [{name: a, acceptedStates: [Ready]}, {selector: {matchLabels: {a: b}}}]\n"),
		[]byte("kustomize: {dir: ../..}\n"),
		[]byte("[]"), nil)
}

// fuzzRepoFiles is the repository FuzzRead reads the fuzzed fleet.yaml
// in: a bundle directory with a manifest, a values file and a local
// chart.
var fuzzRepoFiles = map[string]string{
	"b/cm.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n",
	"b/values.yaml":            "a: 3\nlist: [1, 2]\n",
	"b/chart/Chart.yaml":       "apiVersion: v2\nname: c\nversion: 1.0.0\n",
	"b/chart/templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	"b/overlays/dev/cm.yaml":   "data: {a: c}\n",
}

// FuzzRead: whatever a repository's fleet.yaml holds, Read neither panics
// nor fails without naming the bundle and the file; what it accepts reads
// the same again (the same bundle name, manifest ID and deployment ID),
// and fleet.yaml's model written back as JSON decodes to itself with no
// unknown key.
func FuzzRead(f *testing.F) {
	for _, s := range fleetYAMLSeeds(f) {
		f.Add(s)
	}
	root := f.TempDir()
	for name, content := range fuzzRepoFiles {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip()
		}
		if err := os.WriteFile(filepath.Join(root, "b", "fleet.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, m, err := Read(root, "b", "repo")
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Bundle == "" || ve.Path == "" {
				t.Fatalf("error %v (%T) does not name the bundle and the file", err, err)
			}
			return
		}
		again, m2, err := Read(root, "b", "repo")
		if err != nil || again.Name != b.Name || m2.ID() != m.ID() ||
			fleetyaml.DeploymentID(m2.ID(), again.Options) != fleetyaml.DeploymentID(m.ID(), b.Options) {
			t.Fatalf("read again: %v; name %s, deployment %s; first %s, %s", err, again.Name,
				fleetyaml.DeploymentID(m2.ID(), again.Options), b.Name, fleetyaml.DeploymentID(m.ID(), b.Options))
		}
		if !fleetyaml.ValidReleaseName(b.ReleaseName()) {
			t.Fatalf("bundle %s: release name %q is invalid", b.Name, b.ReleaseName())
		}
		checkDecodeRoundTrip(t, data)
	})
}

// checkDecodeRoundTrip checks that fleet.yaml's decoded model, written
// back as JSON, decodes to the same model with no unknown key.
func checkDecodeRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	fy, _, _, err := decodeFleetYAML(data)
	if err != nil {
		t.Fatalf("Read accepted it, decodeFleetYAML did not: %v", err)
	}
	first, err := json.Marshal(fy)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	again, field, unknown, err := decodeFleetYAML(first)
	if err != nil || len(unknown) > 0 {
		t.Fatalf("written back, %s decodes with error %v at %q, unknown %q", first, err, field, unknown)
	}
	second, err := json.Marshal(again)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("round trip changed fleet.yaml\nbefore %s\nafter  %s", first, second)
	}
}
