package deployer

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ErrInvalidRelease marks a Release that can never be deployed as given.
var ErrInvalidRelease = errors.New("invalid release")

// ErrInvalidMetadata marks labels or annotations, on the Release or on a
// rendered object, that the API server would reject. Errors wrapping it
// also wrap ErrInvalidRelease, and nothing was applied to the cluster.
var ErrInvalidMetadata = errors.New("invalid metadata")

// validate checks what can be checked without a cluster.
func validate(rel Release) error {
	var errs []error
	if rel.Name == "" || len(rel.Name) > 53 {
		errs = append(errs, fmt.Errorf("release name %q must be 1 to 53 characters", rel.Name))
	}
	if rel.Namespace == "" {
		errs = append(errs, errors.New("namespace is empty"))
	}
	if rel.ForceNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(rel.ForceNamespace) {
			errs = append(errs, fmt.Errorf("forced namespace %q: %s", rel.ForceNamespace, msg))
		}
	}
	if rel.Chart == nil || rel.Chart.Metadata == nil {
		errs = append(errs, errors.New("chart is missing"))
	}
	if rel.DeploymentID == "" {
		errs = append(errs, errors.New("deployment ID is empty"))
	}
	fieldErrs := metadataErrors(rel.Labels, rel.Annotations,
		field.NewPath("Release", "Labels"), field.NewPath("Release", "Annotations"))
	fieldErrs = append(fieldErrs, metadataErrors(rel.NamespaceLabels, rel.NamespaceAnnotations,
		field.NewPath("namespaceLabels"), field.NewPath("namespaceAnnotations"))...)
	for _, fe := range fieldErrs {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidMetadata, fe.Error()))
	}
	for _, msg := range validServiceAccount(rel.ServiceAccount) {
		errs = append(errs, fmt.Errorf("service account %q: %s", rel.ServiceAccount, msg))
	}
	errs = append(errs, validateValuesRefs(rel.ValuesFrom)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w %s/%s: %w", ErrInvalidRelease, rel.Namespace, rel.Name, err)
	}
	return nil
}

// metadataErrors validates labels and annotations as the API server does.
// It checks one key at a time, in key order, so that each error's path
// names the key (labels[app]) and messages are stable.
func metadataErrors(labels, annotations map[string]string, labelsPath, annotationsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		errs = append(errs, metav1validation.ValidateLabels(map[string]string{k: labels[k]}, labelsPath.Key(k))...)
	}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		// Only the key: the size limit is checked below, over all values.
		errs = append(errs, apivalidation.ValidateAnnotations(map[string]string{k: ""}, annotationsPath.Key(k))...)
	}
	// The size limit applies to all annotations together.
	if err := apivalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(annotationsPath, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}
