package drift

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	jsonpatch "github.com/evanphx/json-patch"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

// opIgnore is the comparePatches operation that ignores a whole object.
const opIgnore = "ignore"

// Rules are a deployment's compiled comparePatches.
type Rules struct {
	entries []rule
}

// rule is one compiled comparePatches entry.
type rule struct {
	apiVersion, kind, namespace string
	// name matches the whole object name; nil when the entry sets none.
	name *regexp.Regexp
	// ignore is set by an "ignore" operation: matching objects are not
	// compared at all.
	ignore bool
	// steps are the entry's jsonPointers (as remove operations) and then
	// its operations, each compiled on its own.
	steps []step
}

// step is one operation of a rule, as a JSON patch.
type step struct {
	op    string
	patch jsonpatch.Patch
}

// CompileRules compiles patches; a bad name regex or a bad operation is an
// error naming the entry (comparePatches[i]).
//
// An entry applies to an object when every selector it sets matches:
// apiVersion and kind are compared exactly, namespace exactly, and name is
// a regular expression that must match the whole object name. An entry
// that sets no selector applies to every object. For "move" and "copy",
// which need a source that Operation has no field for, Value is the source
// JSON pointer ("from").
func CompileRules(patches []bundle.ComparePatch) (Rules, error) {
	var rules Rules
	for i, p := range patches {
		r, err := compileRule(p)
		if err != nil {
			return Rules{}, fmt.Errorf("comparePatches[%d]: %w", i, err)
		}
		rules.entries = append(rules.entries, r)
	}
	return rules, nil
}

// compileRule compiles one entry.
func compileRule(p bundle.ComparePatch) (rule, error) {
	r := rule{apiVersion: p.APIVersion, kind: p.Kind, namespace: p.Namespace}
	if p.Name != "" {
		re, err := regexp.Compile("^(?:" + p.Name + ")$")
		if err != nil {
			return rule{}, fmt.Errorf("name %q: %w", p.Name, err)
		}
		r.name = re
	}
	for j, ptr := range p.JSONPointers {
		s, err := compileStep(bundle.Operation{Op: "remove", Path: ptr})
		if err != nil {
			return rule{}, fmt.Errorf("jsonPointers[%d]: %w", j, err)
		}
		r.steps = append(r.steps, s)
	}
	for j, op := range p.Operations {
		if op.Op == opIgnore {
			r.ignore = true
			continue
		}
		s, err := compileStep(op)
		if err != nil {
			return rule{}, fmt.Errorf("operations[%d]: %w", j, err)
		}
		r.steps = append(r.steps, s)
	}
	return r, nil
}

// compileStep turns op into the JSON patch that carries it out.
func compileStep(op bundle.Operation) (step, error) {
	if err := checkPointer(op.Path); err != nil {
		return step{}, fmt.Errorf("%s: path: %w", op.Op, err)
	}
	var ops []map[string]any
	switch op.Op {
	case "remove":
		ops = []map[string]any{{"op": op.Op, "path": op.Path}}
	case "add", "test":
		ops = []map[string]any{{"op": op.Op, "path": op.Path, "value": operationValue(op.Value)}}
	case "replace":
		// RFC 6902 replace needs the target to exist, but the library
		// adds a missing object member; removing first restores the
		// RFC's behaviour (a missing target fails the step).
		ops = []map[string]any{
			{"op": "remove", "path": op.Path},
			{"op": "add", "path": op.Path, "value": operationValue(op.Value)},
		}
	case "move", "copy":
		if err := checkPointer(op.Value); err != nil {
			return step{}, fmt.Errorf("%s: value (the source pointer): %w", op.Op, err)
		}
		ops = []map[string]any{{"op": op.Op, "path": op.Path, "from": op.Value}}
	default:
		return step{}, fmt.Errorf("unknown op %q (want remove, add, replace, move, copy, test or ignore)", op.Op)
	}
	doc, err := json.Marshal(ops)
	if err != nil {
		return step{}, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
	}
	patch, err := jsonpatch.DecodePatch(doc)
	if err != nil {
		return step{}, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
	}
	return step{op: op.Op, patch: patch}, nil
}

// checkPointer rejects what is not a JSON pointer to a field below the root.
func checkPointer(ptr string) error {
	if !strings.HasPrefix(ptr, "/") {
		return fmt.Errorf("%q is not a JSON pointer below the document root (it must start with /)", ptr)
	}
	return nil
}

// operationValue is the JSON value of an operation's Value: Value itself
// when it is JSON, else Value as a JSON string.
func operationValue(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	quoted, _ := json.Marshal(v) // A Go string always marshals.
	return quoted
}

// matches reports whether r applies to the object.
func (r rule) matches(apiVersion, kind, namespace, name string) bool {
	return (r.apiVersion == "" || r.apiVersion == apiVersion) &&
		(r.kind == "" || r.kind == kind) &&
		(r.namespace == "" || r.namespace == namespace) &&
		(r.name == nil || r.name.MatchString(name))
}

// Ignored reports whether an op: ignore entry matches the object.
func (r Rules) Ignored(apiVersion, kind, namespace, name string) bool {
	for _, e := range r.entries {
		if e.ignore && e.matches(apiVersion, kind, namespace, name) {
			return true
		}
	}
	return false
}

// apply runs the steps of every entry that matches the object on doc, a
// JSON object. A step that does not apply to doc (its path is missing, an
// array index is out of range) is skipped. A failed "test" discards what
// its entry did to doc, as a failed test fails a whole patch in RFC 6902.
func (r Rules) apply(apiVersion, kind, namespace, name string, doc []byte) []byte {
	for _, e := range r.entries {
		if e.matches(apiVersion, kind, namespace, name) {
			doc = e.applySteps(doc)
		}
	}
	return doc
}

// applySteps runs e's steps on doc (see Rules.apply).
func (e rule) applySteps(doc []byte) []byte {
	out := doc
	for _, s := range e.steps {
		next, err := s.patch.Apply(out)
		switch {
		case err == nil:
			out = next
		case s.op == "test":
			return doc
		}
		// Any other failure means the step does not apply to doc: a
		// well-formed patch on a JSON object fails only for a missing
		// path or index (or a copy over the library's size limit).
	}
	return out
}
