package fleetyaml

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// clusterLabelPrefix starts a helm value that ProcessValues replaces by a
// cluster label.
const clusterLabelPrefix = "global.fleet.clusterLabels."

// maxValuesDepth is Fleet's limit (maxTemplateRecursionDepth) on how deeply
// maps may nest in helm values for the cluster label substitution.
const maxValuesDepth = 50

// ProcessValues applies Fleet's per-cluster processing of helm values
// (preprocessHelmValues in Fleet's internal/cmd/controller/target/
// builder.go) to opts, for cluster c. It runs in Fleet's controller, before
// the deployment ID is computed, so its result is part of the ID. Fleet
// does not inject a global.fleet.clusterLabels map into the values, neither
// there nor in the agent; only the substitution below exists.
//
// The labels it works with are c's labels without those whose key starts
// with "kubectl.kubernetes.io/" or contains "cattle.io/", except that keys
// starting with "fleet.cattle.io/" or "management.cattle.io/" are kept
// (Fleet cleans them with wrangler's CleanAnnotationsForExport, then adds
// those two prefixes back). The annotations are cleaned the same way,
// without the exception. Then, following Fleet step by step:
//
//  1. With no such labels, opts is returned unchanged: no substitution and
//     no templating, even of values that contain "${".
//  2. With no helm options, opts gets empty ones (helm: {}), which changes
//     the deployment ID as it does in Fleet, and nothing else happens.
//  3. Absent values become an empty map. If there are then neither values
//     nor templateValues, processing stops.
//  4. Every string value starting with "global.fleet.clusterLabels." is
//     replaced by the label named by the rest of the string, or by ""
//     when c has no such label (Fleet logs and goes on; it is not an
//     error). This looks into nested maps and into maps inside lists, but
//     not at strings directly inside lists (Fleet does not). It also runs
//     when helm.disablePreProcess is set. Maps nested more than 50 deep are
//     an error.
//  5. Unless helm.disablePreProcess is set, the values are rendered as a Go
//     text/template with delimiters "${" and "}", the function map of
//     sprig's TxtFuncMap without env, expandenv and getHostByName, and the
//     option missingkey=error, over the data ClusterName, ClusterNamespace,
//     ClusterLabels, ClusterAnnotations (maps of strings, as
//     map[string]any so that sprig's dict functions apply) and
//     ClusterValues (c.Values, or an empty map). As in Fleet, the template
//     is the values encoded as one YAML document, and the rendered text is
//     parsed back as YAML: a template's output is therefore typed
//     ("${ .ClusterValues.replicas }" can become the number 3, "true" a
//     boolean), map keys are templates too, and output that breaks the
//     YAML structure is an error. A failing template is reported with the
//     path of the value or key that holds it.
//  6. Unless helm.disablePreProcess is set, each helm.templateValues entry
//     is rendered the same way on its own, parsed as YAML, and the result
//     set as the value of that key, replacing what values held there.
//
// Fleet's function map keeps every sprig function except env and
// expandenv (it also deletes include and tpl, which sprig does not
// define; toYaml is not available, toJson is). getHostByName is removed as
// well here, because a DNS lookup would make the options depend on the
// network; this is the only difference from Fleet's function set. Sprig's
// time and random functions (now, randAlpha, uuidv4, ...) remain available,
// as in Fleet, where they make every reconcile produce a new deployment ID.
//
// Templates come from the repository and are not trusted: the templates
// of one call share one budget (budget.go: DefaultTemplateOutput bytes of
// output, DefaultTemplateAlloc bytes made by functions, DefaultTemplateTime
// of wall time, 1,000 named-template calls). Functions that can make far
// more than they are given (repeat, indent, until, seq, rand*, replace,
// join, printf, ...) are refused before they allocate. Going over is a
// *TemplateBudgetError (class outcome.Invalid), reported with the path of
// the value as other template errors are. This is not a difference from
// Fleet for any template that finishes in Fleet's controller.
//
// ProcessValues does not modify opts; the result shares no helm values
// with it.
func ProcessValues(opts Options, c Cluster) (Options, error) {
	labels := templateLabels(c.Labels)
	if len(labels) == 0 {
		return opts, nil
	}
	if opts.Helm == nil {
		opts.Helm = &HelmOptions{}
		return opts, nil
	}
	h := cloneDeep(*opts.Helm)
	opts.Helm = &h
	if h.Values == nil {
		// Fleet sets an empty GenericMap here, which its deployment ID
		// encodes as "values":{}. Options.Values, tagged omitempty, cannot
		// show the difference; the empty map is kept for when it can.
		h.Values = map[string]any{}
	}
	if h.TemplateValues == nil && len(h.Values) == 0 {
		return opts, nil
	}
	if err := substituteLabels(h.Values, labels, 0); err != nil {
		return Options{}, fmt.Errorf("helm.values: %w", err)
	}
	if h.DisablePreProcess {
		return opts, nil
	}
	data := func() map[string]any { return templateData(c, labels) }
	// One data map serves both renderings, as in Fleet, so that changes
	// sprig's dict functions make to it carry over.
	d := data()
	e := newEvaluator()
	values, err := e.renderValues(h.Values, d, data)
	if err != nil {
		return Options{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(h.TemplateValues)) {
		v, err := e.renderTemplateValue(h.TemplateValues[k], d)
		if err != nil {
			return Options{}, fmt.Errorf("helm.templateValues.%s: %w", k, err)
		}
		values[k] = v
	}
	h.Values = values
	return opts, nil
}

// templateLabels returns labels cleaned as Fleet cleans them for
// templates (see ProcessValues). The result is never nil.
func templateLabels(labels map[string]string) map[string]string {
	out := cleanForExport(labels)
	for k, v := range labels {
		if strings.HasPrefix(k, "fleet.cattle.io/") || strings.HasPrefix(k, "management.cattle.io/") {
			out[k] = v
		}
	}
	return out
}

// cleanForExport drops the keys that wrangler's CleanAnnotationsForExport
// drops: those starting with "kubectl.kubernetes.io/" or containing
// "cattle.io/".
func cleanForExport(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if strings.HasPrefix(k, "kubectl.kubernetes.io/") || strings.Contains(k, "cattle.io/") {
			continue
		}
		out[k] = v
	}
	return out
}

// templateData returns a fresh copy of the data templates see.
func templateData(c Cluster, labels map[string]string) map[string]any {
	values := cloneDeep(c.Values)
	if values == nil {
		values = map[string]any{}
	}
	return map[string]any{
		"ClusterNamespace":   c.Namespace,
		"ClusterName":        c.Name,
		"ClusterLabels":      stringsToAny(labels),
		"ClusterAnnotations": stringsToAny(cleanForExport(c.Annotations)),
		"ClusterValues":      values,
	}
}

func stringsToAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// substituteLabels replaces, in place, the "global.fleet.clusterLabels."
// string values of values (see ProcessValues, step 4).
func substituteLabels(values map[string]any, labels map[string]string, depth int) error {
	if depth > maxValuesDepth {
		return fmt.Errorf("maps nested more than %d levels deep", maxValuesDepth)
	}
	for k, v := range values {
		switch v := v.(type) {
		case string:
			if label, ok := strings.CutPrefix(v, clusterLabelPrefix); ok {
				// A missing label yields "", as in Fleet.
				values[k] = labels[label]
			}
		case map[string]any:
			if err := substituteLabels(v, labels, depth+1); err != nil {
				return err
			}
		case []any:
			for _, item := range v {
				if m, ok := item.(map[string]any); ok {
					if err := substituteLabels(m, labels, depth+1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// templateFuncs is the function map of value templates.
var templateFuncs = sync.OnceValue(func() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "include", "tpl", "getHostByName"} {
		delete(f, name)
	}
	return f
})

// evaluator runs the value templates of one ProcessValues call within
// one budget (budget.go): every template it executes counts against the
// same output, memory and time.
type evaluator struct {
	b     *budget
	funcs template.FuncMap
}

func newEvaluator() *evaluator {
	b := newBudget()
	return &evaluator{b: b, funcs: b.funcs(templateFuncs())}
}

// newValuesTemplate returns an empty template configured as Fleet
// configures value templates, with e's bounded functions.
func (e *evaluator) newValuesTemplate(name string) *template.Template {
	return template.New(name).Funcs(e.funcs).Option("missingkey=error").Delims("${", "}")
}

// execute parses and executes text as a value template. Going over the
// budget is a *TemplateBudgetError.
func (e *evaluator) execute(name, text string, data map[string]any) ([]byte, error) {
	if e.b.err != nil {
		return nil, e.b.err
	}
	tmpl, err := e.newValuesTemplate(name).Parse(text)
	if err != nil {
		return nil, err
	}
	iterate, err := e.newValuesTemplate("check").Parse("${ " + budgetCheckFunc + " false }")
	if err != nil {
		return nil, err
	}
	call, err := e.newValuesTemplate("check").Parse("${ " + budgetCheckFunc + " true }")
	if err != nil {
		return nil, err
	}
	addChecks(tmpl, iterate.Root.Nodes[0], call.Root.Nodes[0])
	var buf bytes.Buffer
	err = tmpl.Execute(io.MultiWriter(e.b, &buf), data)
	if e.b.err != nil {
		// The budget's own error, however text/template wrapped it.
		return nil, e.b.err
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// renderValues renders values as one YAML document template (see
// ProcessValues, step 5). freshData returns new template data, for finding
// which value failed.
func (e *evaluator) renderValues(values, data map[string]any, freshData func() map[string]any) (map[string]any, error) {
	doc, err := yaml.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("helm.values: %w", err)
	}
	out, err := e.execute("values", string(doc), data)
	if err != nil {
		return nil, valuesError(values, freshData, err)
	}
	var rendered map[string]any
	if err := yaml.Unmarshal(out, &rendered); err != nil {
		return nil, valuesError(values, freshData, fmt.Errorf("rendered values are not valid YAML: %w", err))
	}
	if rendered == nil {
		rendered = map[string]any{}
	}
	return rendered, nil
}

// valuesError explains a failure to render values: it renders each key and
// string holding "${" on its own, in a fixed order, and names the first
// that fails. When none does alone, docErr is returned. The search has a
// budget of its own, as large as the one the document ran out of.
func valuesError(values map[string]any, freshData func() map[string]any, docErr error) error {
	if path, err := newEvaluator().firstFailing(values, "", freshData); err != nil {
		return fmt.Errorf("helm.values: %s: %w", path, err)
	}
	return fmt.Errorf("helm.values: %w", docErr)
}

func (e *evaluator) firstFailing(v any, path string, freshData func() map[string]any) (string, error) {
	switch v := v.(type) {
	case string:
		if strings.Contains(v, "${") {
			if _, err := e.execute("value", v, freshData()); err != nil {
				return path, err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if strings.Contains(k, "${") {
				if _, err := e.execute("key", k, freshData()); err != nil {
					where := "key " + strconv.Quote(k)
					if path != "" {
						where = path + ": " + where
					}
					return where, err
				}
			}
			child := k
			if path != "" {
				child = path + "." + k
			}
			if p, err := e.firstFailing(v[k], child, freshData); err != nil {
				return p, err
			}
		}
	case []any:
		for i, item := range v {
			if p, err := e.firstFailing(item, fmt.Sprintf("%s[%d]", path, i), freshData); err != nil {
				return p, err
			}
		}
	}
	return "", nil
}

// renderTemplateValue renders one helm.templateValues entry and parses the
// result as YAML (see ProcessValues, step 6).
func (e *evaluator) renderTemplateValue(text string, data map[string]any) (any, error) {
	out, err := e.execute("templateValue", text, data)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("rendered value is not valid YAML: %q: %w", out, err)
	}
	return v, nil
}
