package bundle

import (
	"encoding/json"
)

// CheckHelmOp checks a HelmOp's bundle spec (api.HelmOpSpec.Bundle: the
// keys of a fleet.yaml) before it is applied, as a fleet.yaml is checked
// when a GitRepo is rendered: a value of the wrong type or an invalid
// setting is a *ValidationError naming the bundle (the HelmOp's name),
// source and key. Keys a fleet.yaml does not define are returned as
// paths ("helm.chrat"): they are ignored, as Fleet ignores them.
func CheckHelmOp(source, name string, spec json.RawMessage) (unknown []string, err error) {
	fy, field, unknown, err := decodeFleetYAML(spec)
	rd := &reader{name: name, file: source}
	if err != nil {
		return nil, rd.invalid(field, err)
	}
	if err := rd.validate(&fy); err != nil {
		return nil, err
	}
	return unknown, nil
}
