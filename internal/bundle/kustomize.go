package bundle

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/postrender"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Fleet's names (internal/helmdeployer/kustomize/kustomize.go): the only
// kustomization file name it looks for in kustomize.dir, and the file,
// next to it, that receives Helm's rendered output.
const (
	kustomizationFile = "kustomization.yaml"
	fleetManifestFile = "fleet-manifests.yaml"
)

// Kustomizer runs a bundle's kustomization over Helm's rendered manifests,
// as Fleet's agent does in its Helm post-renderer
// (internal/helmdeployer/postrender.go, kustomize/kustomize.go):
//
//   - the bundle's files are put in an in-memory file system, at their
//     manifest paths;
//   - Helm's output is written to fleet-manifests.yaml in kustomize.dir,
//     and, when it holds at least one object, that name is put first in
//     the kustomization's resources (unless listed already);
//   - kustomize builds kustomize.dir, with load restrictions "root only"
//     and builtin plugins only (no exec or container plugins, no Helm
//     chart inflation), and without reordering.
//
// Kustomize reads nothing outside the bundle's files: references to remote
// bases or files (git or http URLs) are rejected before building.
//
// A Kustomizer is a Helm post-renderer (postrender.PostRenderer). It is safe
// for concurrent use.
type Kustomizer struct {
	bundle string
	// dir is kustomize.dir, cleaned and relative to the bundle ("." for
	// the bundle directory); file is the kustomization's repository path,
	// for errors.
	dir, file string
	files     map[string][]byte
}

var _ postrender.PostRenderer = (*Kustomizer)(nil)

// kustomizeMu serializes kustomize builds: kustomize keeps its OpenAPI
// schema in package-level state.
var kustomizeMu sync.Mutex

// kustomizeDir returns kustomize.dir cleaned, relative to the bundle.
func kustomizeDir(o Options) string {
	if o.Kustomize == nil || o.Kustomize.Dir == "" {
		return "."
	}
	// Like Fleet's joinAndClean: a leading "/" is the bundle directory. A
	// directory outside the bundle ("../x") holds no kustomization.
	d := strings.TrimPrefix(path.Clean(o.Kustomize.Dir), "/")
	if d == "" {
		return "."
	}
	return d
}

// kustomizationOf returns the manifest path of the bundle's kustomization
// file, if it has one: kustomization.yaml in kustomize.dir. Fleet's agent
// looks for that name only (bundlereader/style.go kustomizePath and
// kustomize.Process), so a kustomization.yml or Kustomization there does
// not make a kustomize bundle.
func kustomizationOf(b Bundle, m Manifest) (string, bool) {
	name := path.Join(kustomizeDir(b.Options), kustomizationFile)
	_, ok := m.resource(name)
	return name, ok
}

// NewKustomizer returns the Kustomizer that post-renders Helm's output for
// bundle b with manifest m, or nil when the bundle has no kustomization in
// its kustomize directory. b.Options are the options of the cluster being
// rendered for (kustomize.dir may differ per cluster). A kustomization that
// refers to something outside the bundle (a remote base, an http URL) is a
// *ValidationError naming the bundle and the kustomization file.
func NewKustomizer(b Bundle, m Manifest) (*Kustomizer, error) {
	if b.Dir == "" {
		b.Dir = "."
	}
	name, ok := kustomizationOf(b, m)
	if !ok {
		return nil, nil
	}
	k := &Kustomizer{
		bundle: b.Name,
		dir:    path.Dir(name),
		file:   path.Join(b.Dir, name),
		files:  make(map[string][]byte, len(m.Resources)),
	}
	for _, r := range m.Resources {
		data, err := r.Data()
		if err != nil {
			return nil, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		k.files[r.Name] = data
	}
	if err := k.checkLocal(b.Dir); err != nil {
		return nil, err
	}
	return k, nil
}

// Run implements postrender.PostRenderer: it returns kustomize's output for
// Helm's rendered manifests. A nil Kustomizer returns its input unchanged.
func (k *Kustomizer) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	if k == nil {
		return rendered, nil
	}
	var in []byte
	if rendered != nil {
		in = rendered.Bytes()
	}
	out, err := k.Build(in)
	if err != nil {
		return nil, err
	}
	return bytes.NewBuffer(out), nil
}

// Build returns kustomize's output, a YAML stream, for Helm's rendered
// manifests (a YAML stream, possibly empty). Errors are *ValidationError
// naming the bundle and the kustomization file.
func (k *Kustomizer) Build(rendered []byte) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	for name, data := range k.files {
		if err := fs.WriteFile(name, data); err != nil {
			return nil, k.invalid(fmt.Errorf("add %s to kustomize's file system: %w", name, err))
		}
	}
	// Like Fleet, Helm output without any object counts as no output: the
	// file is then written empty and not added to the kustomization.
	if !hasDocuments(rendered) {
		rendered = nil
	}
	if err := fs.WriteFile(path.Join(k.dir, fleetManifestFile), rendered); err != nil {
		return nil, k.invalid(fmt.Errorf("write %s: %w", fleetManifestFile, err))
	}
	if rendered != nil {
		if err := k.addManifestsResource(fs); err != nil {
			return nil, err
		}
	}
	kustomizer := krusty.MakeKustomizer(&krusty.Options{
		Reorder:          krusty.ReorderOptionNone,
		LoadRestrictions: types.LoadRestrictionsRootOnly,
		PluginConfig:     types.DisabledPluginConfig(),
	})
	kustomizeMu.Lock()
	resources, err := kustomizer.Run(fs, k.dir)
	kustomizeMu.Unlock()
	if err != nil {
		return nil, k.invalid(fmt.Errorf("kustomize: %w", err))
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, k.invalid(fmt.Errorf("kustomize output: %w", err))
	}
	return out, nil
}

func (k *Kustomizer) invalid(err error) error {
	return &ValidationError{Bundle: k.bundle, Path: k.file, Err: err}
}

// addManifestsResource puts fleet-manifests.yaml first in the
// kustomization's resources, unless it is listed already, as Fleet's
// modifyKustomize does.
func (k *Kustomizer) addManifestsResource(fs filesys.FileSystem) error {
	name := path.Join(k.dir, kustomizationFile)
	data, err := fs.ReadFile(name)
	if err != nil {
		return k.invalid(err)
	}
	var kust map[string]any
	if err := yaml.Unmarshal(data, &kust); err != nil {
		return k.invalid(fmt.Errorf("parse kustomization: %w", err))
	}
	if kust == nil {
		kust = map[string]any{}
	}
	var resources []any
	switch v := kust["resources"].(type) {
	case nil:
	case []any:
		resources = v
	default:
		return k.invalid(fmt.Errorf("resources: want a list of paths, got %T", v))
	}
	if slices.Contains(resources, any(fleetManifestFile)) {
		return nil
	}
	kust["resources"] = append([]any{fleetManifestFile}, resources...)
	if data, err = yaml.Marshal(kust); err != nil {
		return k.invalid(fmt.Errorf("write kustomization: %w", err))
	}
	if err := fs.WriteFile(name, data); err != nil {
		return k.invalid(err)
	}
	return nil
}

// hasDocuments reports whether a YAML stream holds a document that is not
// empty (or one that does not parse, left for kustomize to report).
func hasDocuments(data []byte) bool {
	for _, doc := range splitDocuments(string(data)) {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil || v != nil {
			return true
		}
	}
	return false
}

// Kustomization fields that name other kustomizations or files, by how
// kustomize loads them: kustDirFields may name a directory (another
// kustomization, loaded as a new root, or a git repository to clone) or a
// file; kustFileFields name files (or hold inline content).
var (
	kustDirFields  = []string{"resources", "bases", "components", "generators", "transformers", "validators"}
	kustFileFields = []string{"crds", "configurations", "patchesStrategicMerge"}
)

// checkLocal walks the kustomizations reachable from the bundle's and
// rejects references kustomize would fetch over the network: what its
// loader takes for a git repository (scheme ssh://, https://, http://,
// file://, an scp-style user@host: address or github.com/..., optionally
// behind go-getter's "git::") or, for files, an http(s) URL.
func (k *Kustomizer) checkLocal(bundleDir string) error {
	seen := map[string]bool{}
	queue := []string{path.Join(k.dir, kustomizationFile)}
	for len(queue) > 0 {
		file := queue[0]
		queue = queue[1:]
		if seen[file] {
			continue
		}
		seen[file] = true
		var kust map[string]any
		if err := yaml.Unmarshal(k.files[file], &kust); err != nil {
			// kustomize reports it, naming the file.
			continue
		}
		if field, ref, ok := remoteKustomizationRef(kust); ok {
			return &ValidationError{Bundle: k.bundle, Path: path.Join(bundleDir, file), Field: field,
				Err: fmt.Errorf("%q is remote; kustomize may only use files of the bundle", ref)}
		}
		dir := path.Dir(file)
		for _, field := range kustDirFields {
			for _, ref := range kustStrings(kust[field]) {
				if sub, ok := k.kustomizationIn(path.Join(dir, ref)); ok {
					queue = append(queue, sub)
				}
			}
		}
	}
	return nil
}

// remoteKustomizationRef returns the first reference in kust that
// kustomize would fetch over the network, and the field that holds it.
// It does not follow references to other kustomizations.
func remoteKustomizationRef(kust map[string]any) (field, ref string, ok bool) {
	for _, field := range slices.Concat(kustDirFields, kustFileFields) {
		for _, ref := range kustStrings(kust[field]) {
			if remoteKustomizeRef(ref) {
				return field, ref, true
			}
		}
	}
	if field, ref, ok := remotePathRef(kust); ok {
		return field, ref, true
	}
	return remoteGeneratorRef(kust)
}

// remotePathRef checks the "path" of patches, replacements and the
// OpenAPI schema.
func remotePathRef(kust map[string]any) (field, ref string, ok bool) {
	for _, field := range []string{"patches", "patchesJson6902", "replacements"} {
		for i, item := range kustList(kust[field]) {
			if m, ok := item.(map[string]any); ok {
				if ref, ok := m["path"].(string); ok && remoteKustomizeRef(ref) {
					return fmt.Sprintf("%s[%d].path", field, i), ref, true
				}
			}
		}
	}
	if m, ok := kust["openapi"].(map[string]any); ok {
		if ref, ok := m["path"].(string); ok && remoteKustomizeRef(ref) {
			return "openapi.path", ref, true
		}
	}
	return "", "", false
}

// remoteGeneratorRef checks the files, envs and env of ConfigMap and
// Secret generators.
func remoteGeneratorRef(kust map[string]any) (field, ref string, ok bool) {
	for _, field := range []string{"configMapGenerator", "secretGenerator"} {
		for i, item := range kustList(kust[field]) {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			refs := append(kustStrings(m["files"]), kustStrings(m["envs"])...)
			if env, ok := m["env"].(string); ok {
				refs = append(refs, env)
			}
			for _, ref := range refs {
				// files entries may be "key=path".
				_, p, _ := strings.Cut(ref, "=")
				if remoteKustomizeRef(ref) || remoteKustomizeRef(p) {
					return fmt.Sprintf("%s[%d]", field, i), ref, true
				}
			}
		}
	}
	return "", "", false
}

// kustomizationIn returns the kustomization file of dir, if dir holds one
// under any of the names kustomize accepts.
func (k *Kustomizer) kustomizationIn(dir string) (string, bool) {
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		p := path.Join(dir, name)
		if _, ok := k.files[p]; ok {
			return p, true
		}
	}
	return "", false
}

// scpUser matches the "user@" kustomize takes for an scp-style git address.
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// remoteKustomizeRef reports whether kustomize would fetch ref from the
// network (or another place outside the bundle): it mirrors, a little
// more broadly, kustomize's git.NewRepoSpecFromURL host parsing and
// loader.IsRemoteFile.
func remoteKustomizeRef(ref string) bool {
	s := strings.ToLower(strings.TrimSpace(ref))
	s = strings.TrimPrefix(s, "git::")
	for _, prefix := range []string{"ssh://", "https://", "http://", "file://", "github.com/", "github.com:"} {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return scpUser.MatchString(s)
}

func kustList(v any) []any {
	l, _ := v.([]any)
	return l
}

func kustStrings(v any) []string {
	var out []string
	for _, item := range kustList(v) {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
