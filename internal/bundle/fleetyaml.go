package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// fleetYAML is the content of a fleet.yaml file: Fleet's FleetYAML, which
// is a BundleSpec (deployment options, targets, rollout) plus the bundle's
// name, labels and annotations.
type fleetYAML struct {
	Name   string            `json:"name,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are copied onto the bundle, as Fleet copies them onto
	// its Bundle; they are not deployment options.
	Annotations map[string]string `json:"annotations,omitempty"`
	Options     `json:",inline"`
	Spec        `json:",inline"`
	// ImageScans are Fleet's image-scan write-back settings. Flotilla does
	// not write to Git; they are accepted so Fleet repositories load, and
	// otherwise ignored.
	ImageScans []map[string]any `json:"imageScans,omitempty"`
}

// States a dependsOn acceptedStates entry may name (Fleet's bundle states).
var bundleStates = []string{"Ready", "NotReady", "WaitApplied", "ErrApplied", "OutOfSync", "Pending", "Modified"}

// decodeFleetYAML parses data. A key given twice or a value of the wrong
// type is an error (field names the key of a wrong type, when known). Keys
// fleet.yaml does not define are ignored, as Fleet ignores them, and
// returned in unknown as key paths ("helm.chrat",
// "targetCustomizations[0].clusterSelectr"), sorted. Numbers in helm
// values decode as float64, as in Fleet.
func decodeFleetYAML(data []byte) (fy fleetYAML, field string, unknown []string, err error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fy, "", nil, err
	}
	// The conversion silently keeps the last of a key given twice.
	if field, err := duplicateKey(data); err != nil {
		return fy, field, nil, err
	}
	var probe fleetYAML
	strict, err := kjson.UnmarshalStrict(js, &probe, kjson.DisallowDuplicateFields)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fy, keyPath(te.Field), nil, fmt.Errorf("got %s, want %s", te.Value, jsonKind(te.Type.Kind().String()))
		}
		return fy, "", nil, err
	}
	if len(strict) > 0 {
		msgs := make([]string, 0, len(strict))
		for _, e := range strict {
			msgs = append(msgs, e.Error())
		}
		return fy, "", nil, errors.New(strings.Join(msgs, "; "))
	}
	// The strict pass keeps integers as int64; decode again the way Fleet
	// does, so values (and so deployment IDs) match Fleet's.
	if err := json.Unmarshal(js, &fy); err != nil {
		return fy, "", nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err == nil {
		unknown = api.UnknownFields(raw, reflect.TypeOf(fleetYAML{}))
	} // else the document is not a mapping; the decode above refused it
	return fy, "", unknown, nil
}

// duplicateKey returns the key path of the first key given twice in one
// mapping of data, and an error saying where. A merge key ("<<: *anchor")
// is not a key: the mapping's own keys override the merged ones, as YAML
// allows. Data that does not parse here is left to the decoder.
func duplicateKey(data []byte) (string, error) {
	var doc kyaml.Node
	if kyaml.Unmarshal(data, &doc) != nil {
		return "", nil // the YAML-to-JSON conversion reports syntax errors
	}
	return duplicateKeyIn(&doc, "")
}

func duplicateKeyIn(n *kyaml.Node, path string) (string, error) {
	switch n.Kind {
	case kyaml.DocumentNode:
		for _, c := range n.Content {
			if f, err := duplicateKeyIn(c, path); err != nil {
				return f, err
			}
		}
	case kyaml.SequenceNode:
		for i, c := range n.Content {
			if f, err := duplicateKeyIn(c, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return f, err
			}
		}
	case kyaml.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if path != "" {
				key = path + "." + k.Value
			}
			if k.Kind == kyaml.ScalarNode && k.ShortTag() != "!!merge" {
				if line, ok := seen[k.Value]; ok {
					return key, fmt.Errorf("given twice, on lines %d and %d", line, k.Line)
				}
				seen[k.Value] = k.Line
			}
			if f, err := duplicateKeyIn(v, key); err != nil {
				return f, err
			}
		}
	}
	// An alias is checked where its anchor is defined.
	return "", nil
}

// keyPath drops the Go names of embedded structs (Options, Spec,
// TargetSelector) from a decoding error's field path, leaving the
// fleet.yaml key path.
func keyPath(field string) string {
	parts := strings.Split(field, ".")
	keep := parts[:0]
	for _, p := range parts {
		if p != "" && (p[0] < 'A' || p[0] > 'Z') {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ".")
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32":
		return "an integer"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "slice":
		return "a list"
	case "map", "struct", "ptr":
		return "a mapping"
	}
	return k
}

// validate checks fleet.yaml's settings that Fleet would reject or that
// would fail later with a less clear message.
func (rd *reader) validate(fy *fleetYAML) error {
	if fy.Name != "" {
		if errs := validation.IsDNS1123Subdomain(fy.Name); len(errs) > 0 {
			return rd.invalid("name", fmt.Errorf("%q is invalid: %s", fy.Name, strings.Join(errs, "; ")))
		}
	}
	if err := rd.checkLabels("labels", fy.Labels); err != nil {
		return err
	}
	if err := rd.checkAnnotations("annotations", fy.Annotations); err != nil {
		return err
	}
	if err := rd.checkOptions("", fy.Options); err != nil {
		return err
	}
	switch fy.TargetCustomizationMode {
	case "", FirstMatch, AllMatches:
	default:
		return rd.invalid("targetCustomizationMode", fmt.Errorf("%q must be %s or %s", fy.TargetCustomizationMode, FirstMatch, AllMatches))
	}
	for _, list := range []struct {
		field   string
		targets []Target
	}{{"targets", fy.Targets}, {"targetCustomizations", fy.TargetCustomizations}} {
		for i, t := range list.targets {
			f := fmt.Sprintf("%s[%d]", list.field, i)
			if err := rd.checkSelector(f, t.TargetSelector); err != nil {
				return err
			}
			if err := rd.checkOptions(f+".", t.Options); err != nil {
				return err
			}
		}
	}
	for i, t := range fy.OverrideTargets {
		if err := rd.checkSelector(fmt.Sprintf("overrideTargets[%d]", i), t); err != nil {
			return err
		}
	}
	if err := rd.checkDependsOn(fy.DependsOn); err != nil {
		return err
	}
	if rs := fy.RolloutStrategy; rs != nil {
		if err := rd.checkRollout(rs); err != nil {
			return err
		}
	}
	return nil
}

// checkDependsOn checks that each dependency names a bundle or selects
// bundles (not both) and accepts only bundle states.
func (rd *reader) checkDependsOn(deps []BundleRef) error {
	for i, d := range deps {
		f := fmt.Sprintf("dependsOn[%d]", i)
		if d.Name == "" && d.Selector == nil {
			return rd.invalid(f, errors.New("needs a name or a selector"))
		}
		if d.Name != "" && d.Selector != nil {
			return rd.invalid(f, errors.New("has both a name and a selector; give one"))
		}
		if d.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(d.Selector); err != nil {
				return rd.invalid(f+".selector", err)
			}
		}
		for j, s := range d.AcceptedStates {
			if !slices.Contains(bundleStates, s) {
				return rd.invalid(fmt.Sprintf("%s.acceptedStates[%d]", f, j), fmt.Errorf("%q is not a bundle state (%s)", s, strings.Join(bundleStates, ", ")))
			}
		}
	}
	return nil
}

func (rd *reader) checkRollout(rs *RolloutStrategy) error {
	checks := []struct {
		field string
		v     *intstr.IntOrString
	}{
		{"rolloutStrategy.maxUnavailable", rs.MaxUnavailable},
		{"rolloutStrategy.maxUnavailablePartitions", rs.MaxUnavailablePartitions},
		{"rolloutStrategy.autoPartitionSize", rs.AutoPartitionSize},
		{"rolloutStrategy.failureThreshold", rs.FailureThreshold},
	}
	names := map[string]int{}
	for i, p := range rs.Partitions {
		f := fmt.Sprintf("rolloutStrategy.partitions[%d]", i)
		// Approvals and status name partitions, so names must be unique;
		// an unnamed partition is called partition-<index>.
		name := fleetyaml.PartitionName(i, p)
		if name == UnpartitionedName {
			return rd.invalid(f+".name", fmt.Errorf("%q is reserved for the clusters no partition selects", name))
		}
		if j, dup := names[name]; dup {
			return rd.invalid(f+".name", fmt.Errorf("%q is also the name of partitions[%d]", name, j))
		}
		names[name] = i
		checks = append(checks, struct {
			field string
			v     *intstr.IntOrString
		}{f + ".maxUnavailable", p.MaxUnavailable})
		sel := api.TargetSelector{Name: p.Name, ClusterName: p.ClusterName, ClusterSelector: p.ClusterSelector,
			ClusterGroup: p.ClusterGroup, ClusterGroupSelector: p.ClusterGroupSelector}
		if err := rd.checkSelector(f, sel); err != nil {
			return err
		}
	}
	for _, c := range checks {
		if err := checkIntOrPercent(c.v); err != nil {
			return rd.invalid(c.field, err)
		}
	}
	if rs.MaxNew < 0 {
		return rd.invalid("rolloutStrategy.maxNew", fmt.Errorf("%d is negative", rs.MaxNew))
	}
	if rs.AutoPartitionThreshold != nil && *rs.AutoPartitionThreshold < 0 {
		return rd.invalid("rolloutStrategy.autoPartitionThreshold", fmt.Errorf("%d is negative", *rs.AutoPartitionThreshold))
	}
	if rs.ReadyTimeoutSeconds != nil && *rs.ReadyTimeoutSeconds <= 0 {
		return rd.invalid("rolloutStrategy.readyTimeoutSeconds", fmt.Errorf("%d must be positive", *rs.ReadyTimeoutSeconds))
	}
	for i, w := range rs.Windows {
		if _, key, err := w.ParseKey(); err != nil {
			return rd.invalid(fmt.Sprintf("rolloutStrategy.windows[%d].%s", i, key), err)
		}
	}
	return nil
}

// checkIntOrPercent accepts a non-negative count or a percentage "N%".
func checkIntOrPercent(v *intstr.IntOrString) error {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return fmt.Errorf("%d is negative", v.IntVal)
		}
		return nil
	}
	s := v.StrVal
	if !strings.HasSuffix(s, "%") {
		return fmt.Errorf("%q must be a count or a percentage such as \"25%%\"", s)
	}
	if _, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	if strings.HasPrefix(s, "-") {
		return fmt.Errorf("%q is negative", s)
	}
	return nil
}

func (rd *reader) checkSelector(field string, t api.TargetSelector) error {
	for _, s := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"clusterSelector", t.ClusterSelector}, {"clusterGroupSelector", t.ClusterGroupSelector}} {
		if s.sel == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(s.sel); err != nil {
			return rd.invalid(field+"."+s.name, err)
		}
	}
	return nil
}

// checkOptions validates deployment options; prefix is the key path of
// the options ("" at the top, "targetCustomizations[0]." in a target).
func (rd *reader) checkOptions(prefix string, o Options) error {
	if err := rd.checkNamespaceOptions(prefix, o); err != nil {
		return err
	}
	if o.Kustomize != nil && o.Kustomize.Dir != "" {
		if _, err := rd.localPath(prefix+"kustomize.dir", o.Kustomize.Dir); err != nil {
			return err
		}
	}
	if o.YAML != nil {
		for i, name := range o.YAML.Overlays {
			if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
				return rd.invalid(fmt.Sprintf("%syaml.overlays[%d]", prefix, i), fmt.Errorf("%q must name a directory under overlays/", name))
			}
		}
	}
	if o.Diff != nil {
		if err := rd.checkComparePatches(prefix, o.Diff.ComparePatches); err != nil {
			return err
		}
	}
	for i, d := range o.DownstreamResources {
		f := fmt.Sprintf("%sdownstreamResources[%d]", prefix, i)
		if d.Kind != "Secret" && d.Kind != "ConfigMap" {
			return rd.invalid(f+".kind", fmt.Errorf("%q must be Secret or ConfigMap", d.Kind))
		}
		if d.Name == "" {
			return rd.invalid(f+".name", errors.New("is required"))
		}
	}
	if o.Helm != nil {
		if err := rd.checkHelm(prefix, o.Helm); err != nil {
			return err
		}
	}
	return nil
}

// checkNamespaceOptions checks the names the options give Kubernetes
// objects: namespaces, the service account, and the namespace's labels and
// annotations.
func (rd *reader) checkNamespaceOptions(prefix string, o Options) error {
	for _, c := range []struct{ field, value string }{
		{"defaultNamespace", o.DefaultNamespace},
		{"namespace", o.TargetNamespace},
	} {
		if c.value == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(c.value); len(errs) > 0 {
			return rd.invalid(prefix+c.field, fmt.Errorf("%q is not a valid namespace name: %s", c.value, strings.Join(errs, "; ")))
		}
	}
	if o.ServiceAccount != "" {
		if errs := validation.IsDNS1123Subdomain(o.ServiceAccount); len(errs) > 0 {
			return rd.invalid(prefix+"serviceAccount", fmt.Errorf("%q is not a valid service account name: %s", o.ServiceAccount, strings.Join(errs, "; ")))
		}
	}
	if err := rd.checkLabels(prefix+"namespaceLabels", o.NamespaceLabels); err != nil {
		return err
	}
	return rd.checkAnnotations(prefix+"namespaceAnnotations", o.NamespaceAnnotations)
}

// checkAnnotations checks annotation keys as Kubernetes does (qualified
// names, compared in lower case); values are free text.
func (rd *reader) checkAnnotations(field string, annotations map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) > 0 {
			return rd.invalid(field+"."+k, fmt.Errorf("invalid annotation key %q: %s", k, strings.Join(errs, "; ")))
		}
	}
	return nil
}

// checkComparePatches checks that the diff's patch operations are JSON
// patch operations or "ignore".
func (rd *reader) checkComparePatches(prefix string, patches []ComparePatch) error {
	for i, p := range patches {
		for j, op := range p.Operations {
			switch op.Op {
			case "remove", "ignore", "add", "replace", "test", "move", "copy":
			default:
				return rd.invalid(fmt.Sprintf("%sdiff.comparePatches[%d].operations[%d].op", prefix, i, j), fmt.Errorf("%q is not a JSON patch operation or \"ignore\"", op.Op))
			}
		}
	}
	return nil
}

func (rd *reader) checkHelm(prefix string, h *HelmOptions) error {
	if h.ReleaseName != "" && !fleetyaml.ValidReleaseName(h.ReleaseName) {
		return rd.invalid(prefix+"helm.releaseName", fmt.Errorf("%q must be at most %d characters of lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", h.ReleaseName, MaxReleaseNameLen))
	}
	if h.TimeoutSeconds < 0 && prefix == "" {
		return rd.invalid(prefix+"helm.timeoutSeconds", fmt.Errorf("%d is negative", h.TimeoutSeconds))
	}
	if h.MaxHistory < 0 {
		return rd.invalid(prefix+"helm.maxHistory", fmt.Errorf("%d is negative", h.MaxHistory))
	}
	for i, vf := range h.ValuesFrom {
		f := fmt.Sprintf("%shelm.valuesFrom[%d]", prefix, i)
		refs := 0
		for _, r := range []*KeyRef{vf.ConfigMapKeyRef, vf.SecretKeyRef} {
			if r == nil {
				continue
			}
			refs++
			if r.Name == "" {
				return rd.invalid(f, errors.New("name is required"))
			}
		}
		if refs != 1 {
			return rd.invalid(f, errors.New("needs exactly one of configMapKeyRef and secretKeyRef"))
		}
	}
	for k := range h.TemplateValues {
		if k == "" {
			return rd.invalid(prefix+"helm.templateValues", errors.New("has an empty key"))
		}
	}
	if h.Repo != "" && h.Chart == "" {
		return rd.invalid(prefix+"helm.chart", fmt.Errorf("is required with helm.repo %q: name the chart in the repository", h.Repo))
	}
	if strings.HasPrefix(h.Chart, "/") {
		return rd.invalid(prefix+"helm.chart", fmt.Errorf("%q is absolute: %w", h.Chart, ErrOutsideRepo))
	}
	return nil
}
