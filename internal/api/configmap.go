package api

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// KindConfigMap is a Kubernetes v1 ConfigMap.
const KindConfigMap = "ConfigMap"

// ConfigMap is a Kubernetes v1 ConfigMap. `flotilla apply` stores it in
// Temporal (its data is not secret), where bundles that name it in
// fleet.yaml downstreamResources copy it from to their clusters.
type ConfigMap struct {
	TypeMeta   `json:",inline"`
	Metadata   ObjectMeta        `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
}

// Validate checks the name and the keys with Kubernetes' rules; a key may
// not be both in data and in binaryData.
func (c *ConfigMap) Validate() error {
	errs := validateMeta(c.Metadata, true, field.NewPath("metadata"))
	errs = append(errs, validateDataKeys(c.Data, field.NewPath("data"))...)
	errs = append(errs, validateDataKeys(c.BinaryData, field.NewPath("binaryData"))...)
	for _, k := range slices.Sorted(maps.Keys(c.BinaryData)) {
		if _, ok := c.Data[k]; ok {
			errs = append(errs, field.Duplicate(field.NewPath("binaryData").Key(k), k))
		}
	}
	return invalid(KindConfigMap, c.Metadata.Namespace+"/"+c.Metadata.Name, errs)
}

// validateDataKeys checks the keys of a ConfigMap's or Secret's data
// (letters, digits, '-', '_', '.'; at most 253). Messages name the key,
// never a value.
func validateDataKeys[V any](data map[string]V, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(data)) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p, k, msg))
		}
	}
	return errs
}
