package plan

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Markers that stand for a Secret's values in a plan. A hash would tell
// whether a value changed too, but a hash of a short or guessable secret
// gives it away; the marker is chosen by comparing both sides' values
// instead.
const (
	// Redacted stands for a value that the other side has the same, or
	// does not have (the key itself shows as added or removed).
	Redacted = "<redacted>"
	// RedactedChanged stands, on the after side, for a value that differs
	// from the before side's value of the same key.
	RedactedChanged = "<redacted, changed>"
)

// lastApplied is kubectl's annotation, which holds a whole copy of the
// object: on a Secret, its values.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// secretFields are where a Secret holds values.
var secretFields = []string{"data", "stringData"}

// redactSecret replaces the values of two normalised sides of one Secret
// (either may be nil) by Redacted or RedactedChanged, and drops their
// kubectl last-applied annotation. Values are compared decoded, so a
// value moved between stringData and data is not a change.
func redactSecret(before, after map[string]any) {
	bv, av := secretValues(before), secretValues(after)
	for _, side := range []struct {
		obj     map[string]any
		changed func(key string) bool
	}{
		{before, func(string) bool { return false }},
		{after, func(k string) bool { old, ok := bv[k]; return ok && old != av[k] }},
	} {
		if side.obj == nil {
			continue
		}
		dropAnnotations(side.obj, []string{lastApplied})
		for _, f := range secretFields {
			values, ok := side.obj[f].(map[string]any)
			if !ok {
				if side.obj[f] != nil {
					side.obj[f] = Redacted // not a map: not a valid Secret, still not shown
				}
				continue
			}
			for k := range values {
				values[k] = Redacted
				if side.changed(k) {
					values[k] = RedactedChanged
				}
			}
		}
	}
}

// secretValues maps a Secret's keys to their decoded values, stringData
// winning over data as the API server merges them. A data value that is
// not base64 counts as itself.
func secretValues(obj map[string]any) map[string]string {
	out := map[string]string{}
	if obj == nil {
		return out
	}
	if data, ok := obj["data"].(map[string]any); ok {
		for k, v := range data {
			s := fmt.Sprint(v)
			if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
				s = string(dec)
			}
			out[k] = s
		}
	}
	if data, ok := obj["stringData"].(map[string]any); ok {
		for k, v := range data {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// ErrorText is what a plan shows of err, the API server's refusal of
// obj's dry run: the server's own message ("... spec.selector: Invalid
// value: ...: field is immutable"). For a Secret, whose refusal may quote
// its values, only the reason and the fields named are shown
// ("Invalid: data[token.key]: FieldValueInvalid").
func ErrorText(obj *unstructured.Unstructured, err error) string {
	if err == nil {
		return ""
	}
	var se apierrors.APIStatus
	isStatus := errors.As(err, &se)
	if !isSecret(obj) {
		if isStatus && se.Status().Message != "" {
			return se.Status().Message
		}
		return err.Error()
	}
	if !isStatus {
		return fmt.Sprintf("Secret %q: dry run failed (details withheld: the object is a Secret)", obj.GetName())
	}
	st := se.Status()
	parts := []string{string(st.Reason)}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			parts = append(parts, strings.TrimSpace(c.Field+": "+string(c.Type)))
		}
	}
	return fmt.Sprintf("Secret %q refused: %s (details withheld: the object is a Secret)", obj.GetName(), strings.Join(parts, "; "))
}
