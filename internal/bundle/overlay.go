package bundle

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// overlaysDir holds the yaml.overlays directories of a bundle.
const overlaysDir = "overlays/"

// patchMarker marks an overlay file as a patch: "<base>_patch.<ext>"
// patches "<base>.<ext>".
const patchMarker = "_patch."

// applyOverlays returns m with the bundle's yaml.overlays applied, the way
// Fleet's agent does for raw YAML bundles
// (internal/helmdeployer/render/patch/patch.go). For each overlay name in
// order, each file under overlays/<name>/ is taken by its path relative to
// that directory:
//
//   - a file whose base name contains "_patch." patches the bundle file
//     named without it ("a_patch.yaml" patches "a.yaml", "a_patch.json"
//     patches "a.json": any extension). The base file must exist, possibly
//     added by an earlier overlay. Both are read as YAML (the first document
//     only, as Fleet does) and the patch is a JSON patch when it is a list,
//     otherwise a strategic merge patch when the base is a Kubernetes kind
//     built into client-go (CustomResourceDefinition excepted), otherwise a
//     JSON merge patch. The patched file is written back as YAML.
//   - any other file replaces the bundle file of the same path, or is added
//     when there is none.
//
// Fleet visits an overlay's files in random (map) order; here all
// replacements of an overlay come first, then its patches, each in name
// order. Unlike Fleet, which silently ignores it, an overlay name with no
// files under overlays/<name>/ is a *ValidationError. The overlays/ files
// themselves are never deployed (rawFiles leaves them out).
func applyOverlays(b Bundle, m Manifest) (Manifest, error) {
	if b.Options.YAML == nil || len(b.Options.YAML.Overlays) == 0 {
		return m, nil
	}
	files := make(map[string][]byte, len(m.Resources))
	for _, r := range m.Resources {
		data, err := r.Data()
		if err != nil {
			return Manifest{}, &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, r.Name), Err: err}
		}
		files[r.Name] = data
	}
	for _, overlay := range b.Options.YAML.Overlays {
		if err := applyOverlay(b, files, overlay); err != nil {
			return Manifest{}, err
		}
	}
	out := Manifest{Resources: make([]Resource, 0, len(files))}
	for name, data := range files {
		out.Resources = append(out.Resources, newResource(name, data))
	}
	slices.SortFunc(out.Resources, func(a, b Resource) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func applyOverlay(b Bundle, files map[string][]byte, overlay string) error {
	prefix := overlaysDir + overlay + "/"
	var replace, patches []string
	for name := range files {
		rel, ok := strings.CutPrefix(name, prefix)
		if !ok || rel == "" {
			continue
		}
		if strings.Contains(path.Base(rel), patchMarker) {
			patches = append(patches, rel)
		} else {
			replace = append(replace, rel)
		}
	}
	if len(replace) == 0 && len(patches) == 0 {
		return &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, overlaysDir, overlay), Field: "yaml.overlays",
			Err: fmt.Errorf("overlay %q does not exist: no files under %s", overlay, prefix)}
	}
	slices.Sort(replace)
	slices.Sort(patches)
	for _, rel := range replace {
		files[rel] = files[prefix+rel]
	}
	for _, rel := range patches {
		target := path.Join(path.Dir(rel), strings.Replace(path.Base(rel), patchMarker, ".", 1))
		invalid := func(err error) error {
			return &ValidationError{Bundle: b.Name, Path: path.Join(b.Dir, prefix+rel), Err: err}
		}
		base, ok := files[target]
		if !ok {
			return invalid(fmt.Errorf("patch target %s does not exist", path.Join(b.Dir, target)))
		}
		patched, err := patchOverlayFile(base, files[prefix+rel])
		if err != nil {
			return invalid(fmt.Errorf("patch %s: %w", path.Join(b.Dir, target), err))
		}
		files[target] = patched
	}
	return nil
}

// patchOverlayFile applies the YAML patch file data to the YAML file base and
// returns the result as YAML.
func patchOverlayFile(base, data []byte) ([]byte, error) {
	original, err := yamlFileToJSON(base)
	if err != nil {
		return nil, fmt.Errorf("read file: %w", err)
	}
	patch, err := yamlFileToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("read patch: %w", err)
	}
	out, err := applyOverlayPatch(original, patch)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(out)
}

// yamlFileToJSON returns the first YAML document of data as JSON: a
// mapping, else a list; an empty document is the empty mapping.
func yamlFileToJSON(data []byte) ([]byte, error) {
	var m map[string]any
	if err := kyaml.Unmarshal(data, &m); err == nil {
		if m == nil {
			m = map[string]any{}
		}
		return json.Marshal(m)
	}
	var l []any
	if err := kyaml.Unmarshal(data, &l); err != nil {
		return nil, err
	}
	if l == nil {
		l = []any{}
	}
	return json.Marshal(l)
}

// applyOverlayPatch applies a JSON patch (a list of operations), strategic merge
// patch or JSON merge patch to original, choosing as Fleet does (wrangler's
// patch.Apply).
func applyOverlayPatch(original, patch []byte) ([]byte, error) {
	if len(patch) > 0 && patch[0] == '[' {
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, fmt.Errorf("JSON patch: %w", err)
		}
		out, err := ops.Apply(original)
		if err != nil {
			return nil, fmt.Errorf("JSON patch: %w", err)
		}
		return out, nil
	}
	var head metav1.PartialObjectMetadata
	if err := json.Unmarshal(original, &head); err != nil {
		return nil, fmt.Errorf("only a JSON patch (a list) applies to a file that is not a mapping: %w", err)
	}
	gvk := head.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" || gvk.Kind == "CustomResourceDefinition" {
		return jsonMergePatch(original, patch)
	}
	obj, err := scheme.Scheme.New(gvk)
	if runtime.IsNotRegisteredError(err) {
		return jsonMergePatch(original, patch)
	}
	if err != nil {
		return nil, err
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(obj)
	if err != nil {
		return nil, err
	}
	var originalMap, patchMap map[string]any
	if err := json.Unmarshal(original, &originalMap); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &patchMap); err != nil {
		return nil, errors.New("a strategic merge patch must be a mapping")
	}
	out, err := strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(originalMap, patchMap, meta)
	if err != nil {
		return nil, fmt.Errorf("strategic merge patch: %w", err)
	}
	return json.Marshal(out)
}

func jsonMergePatch(original, patch []byte) ([]byte, error) {
	out, err := jsonpatch.MergePatch(original, patch)
	if err != nil {
		return nil, fmt.Errorf("JSON merge patch: %w", err)
	}
	return out, nil
}
