package fleetyaml

import (
	"maps"
	"reflect"
	"strings"
)

// MergeOptions returns base with the customization custom applied, by the
// rules of Fleet's options.Merge (internal/cmd/controller/options/
// calculate.go), which decide what a fleet.yaml target or target
// customization can change:
//
//   - defaultNamespace, namespace, serviceAccount and helm's chart, repo,
//     releaseName and version: custom's value when not empty;
//   - helm.values: deep-merged, custom winning (maps merge, anything else
//     is replaced);
//   - helm.templateValues, namespaceLabels, namespaceAnnotations: merged
//     key by key, custom winning;
//   - helm.valuesFrom (by kind, namespace, name and key),
//     diff.comparePatches (by apiVersion, kind, namespace and name) and
//     downstreamResources (by kind, case-insensitive, and name): merged by
//     key. A custom entry replaces the base entry of the same key in place,
//     others are appended; of custom entries sharing a key the first
//     counts; entries without a key (a valuesFrom naming neither a
//     ConfigMap nor a Secret) are always appended;
//   - helm's force, atomic, takeOwnership, disablePreProcess, waitForJobs,
//     disableDNS and keepResources: OR-ed;
//   - helm.timeoutSeconds and forceSyncGeneration: custom's value when
//     positive; a negative helm.timeoutSeconds resets it to 0;
//   - yaml.overlays: custom's appended to base's;
//   - kustomize.dir: custom's when not empty;
//   - correctDrift: custom's, as a whole, when set.
//
// A custom helm, kustomize, yaml or diff section that is present but sets
// nothing still makes the section present in the result, as in Fleet, where
// it shows in the deployment ID ("kustomize":{}).
//
// Everything else in custom is ignored, as Fleet ignores it: helm's
// maxHistory, valuesFiles, skipSchemaValidation and
// disableDependencyUpdate, deleteNamespace, deleteCRDResources and
// ignore.conditions. Surprising, but a customization setting them has no
// effect in Fleet, and honouring them would both deploy differently and
// change the deployment ID. Likewise a value of "-" does not clear a
// string: Fleet's clearing branch (`else if x == "-"` after `if x != ""`)
// can never run, so "-" is set literally.
//
// MergeOptions never modifies its arguments, and the result shares no
// maps, slices or pointers with them.
func MergeOptions(base, custom Options) Options {
	out := cloneDeep(base)
	overrideString(&out.DefaultNamespace, custom.DefaultNamespace)
	overrideString(&out.TargetNamespace, custom.TargetNamespace)
	overrideString(&out.ServiceAccount, custom.ServiceAccount)
	if custom.Helm != nil {
		if out.Helm == nil {
			out.Helm = &HelmOptions{}
		}
		mergeHelm(out.Helm, cloneDeep(*custom.Helm))
	}
	if custom.Kustomize != nil {
		if out.Kustomize == nil {
			out.Kustomize = &KustomizeOptions{}
		}
		overrideString(&out.Kustomize.Dir, custom.Kustomize.Dir)
	}
	if custom.Diff != nil {
		if out.Diff == nil {
			out.Diff = &DiffOptions{}
		}
		out.Diff.ComparePatches = mergeListByKey(out.Diff.ComparePatches, cloneDeep(custom.Diff.ComparePatches), comparePatchKey)
	}
	if custom.YAML != nil {
		if out.YAML == nil {
			out.YAML = &YAMLOptions{}
		}
		out.YAML.Overlays = append(out.YAML.Overlays, custom.YAML.Overlays...)
	}
	if custom.ForceSyncGeneration > 0 {
		out.ForceSyncGeneration = custom.ForceSyncGeneration
	}
	out.KeepResources = out.KeepResources || custom.KeepResources
	if custom.CorrectDrift != nil {
		cd := *custom.CorrectDrift
		out.CorrectDrift = &cd
	}
	out.DownstreamResources = mergeListByKey(out.DownstreamResources, cloneDeep(custom.DownstreamResources), downstreamResourceKey)
	out.NamespaceLabels = mergeStringMap(out.NamespaceLabels, custom.NamespaceLabels)
	out.NamespaceAnnotations = mergeStringMap(out.NamespaceAnnotations, custom.NamespaceAnnotations)
	return out
}

// mergeHelm merges custom into h; both are private copies.
func mergeHelm(h *HelmOptions, custom HelmOptions) {
	switch {
	case custom.TimeoutSeconds > 0:
		h.TimeoutSeconds = custom.TimeoutSeconds
	case custom.TimeoutSeconds < 0:
		h.TimeoutSeconds = 0
	}
	switch {
	case h.Values == nil:
		h.Values = custom.Values
	case custom.Values != nil:
		h.Values = MergeValues(h.Values, custom.Values)
	}
	switch {
	case h.TemplateValues == nil:
		h.TemplateValues = custom.TemplateValues
	case custom.TemplateValues != nil:
		maps.Copy(h.TemplateValues, custom.TemplateValues)
	}
	h.ValuesFrom = mergeListByKey(h.ValuesFrom, custom.ValuesFrom, valuesFromKey)
	overrideString(&h.Repo, custom.Repo)
	overrideString(&h.Chart, custom.Chart)
	overrideString(&h.Version, custom.Version)
	overrideString(&h.ReleaseName, custom.ReleaseName)
	h.Force = h.Force || custom.Force
	h.Atomic = h.Atomic || custom.Atomic
	h.TakeOwnership = h.TakeOwnership || custom.TakeOwnership
	h.DisablePreProcess = h.DisablePreProcess || custom.DisablePreProcess
	h.WaitForJobs = h.WaitForJobs || custom.WaitForJobs
	h.DisableDNS = h.DisableDNS || custom.DisableDNS
}

func overrideString(dst *string, custom string) {
	if custom != "" {
		*dst = custom
	}
}

// mergeStringMap returns base (a private copy) with custom's entries set.
func mergeStringMap(base, custom map[string]string) map[string]string {
	if len(custom) == 0 {
		return base
	}
	if base == nil {
		base = make(map[string]string, len(custom))
	}
	maps.Copy(base, custom)
	return base
}

// mergeListByKey merges custom into base by the key of each entry (see
// MergeOptions). base may be modified; custom must not be shared.
func mergeListByKey[T any](base, custom []T, key func(T) string) []T {
	if len(custom) == 0 {
		return base
	}
	// A key repeated in base resolves to its last entry, as in Fleet's
	// merge.ByKey.
	index := make(map[string]int, len(base))
	for i, v := range base {
		if k := key(v); k != "" {
			index[k] = i
		}
	}
	seen := make(map[string]bool, len(custom))
	for _, v := range custom {
		k := key(v)
		if k != "" {
			if seen[k] {
				continue
			}
			seen[k] = true
			if i, ok := index[k]; ok {
				base[i] = v
				continue
			}
		}
		base = append(base, v)
	}
	return base
}

func valuesFromKey(v ValuesFrom) string {
	if r := v.ConfigMapKeyRef; r != nil {
		return "configmap|" + r.Namespace + "|" + r.Name + "|" + r.Key
	}
	if r := v.SecretKeyRef; r != nil {
		return "secret|" + r.Namespace + "|" + r.Name + "|" + r.Key
	}
	return ""
}

func comparePatchKey(p ComparePatch) string {
	return p.APIVersion + "|" + p.Kind + "|" + p.Namespace + "|" + p.Name
}

func downstreamResourceKey(r DownstreamResource) string {
	return strings.ToLower(r.Kind) + "|" + r.Name
}

// cloneDeep returns a copy of v that shares no map, slice, pointer or
// interface value with it, keeping nil and empty apart. Exported fields of
// structs are copied deeply, unexported ones shallowly. It works on any
// Options (whatever fields are added later) and on values trees.
func cloneDeep[T any](v T) T {
	src := reflect.ValueOf(&v).Elem()
	dst := reflect.New(src.Type()).Elem()
	copyDeep(dst, src)
	return dst.Interface().(T)
}

// copyDeep sets dst, a settable zero value of src's type, to a deep copy of
// src.
func copyDeep(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyDeep(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := reflect.New(src.Elem().Type()).Elem()
		copyDeep(e, src.Elem())
		dst.Set(e)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			e := reflect.New(src.Type().Elem()).Elem()
			copyDeep(e, it.Value())
			m.SetMapIndex(it.Key(), e)
		}
		dst.Set(m)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyDeep(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Array:
		for i := range src.Len() {
			copyDeep(dst.Index(i), src.Index(i))
		}
	case reflect.Struct:
		dst.Set(src)
		for i := range src.NumField() {
			if f := dst.Field(i); f.CanSet() {
				f.SetZero()
				copyDeep(f, src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}
