package drift

import "encoding/json"

// Redacted stands for a Secret's value in a drift patch.
const Redacted = "(redacted)"

// Redact returns patch with the values under data and stringData replaced
// by Redacted when the object is a core Secret: drift patches travel to
// status, workflow history and `flotilla diff`, which must not carry
// secret values. Keys stay (they say what differs; a null still says the
// key is to be removed), and so does the rest of the patch. Other kinds,
// and patches that are not JSON objects, are returned as they are.
func Redact(apiVersion, kind string, patch []byte) []byte {
	if apiVersion != "v1" || kind != "Secret" {
		return patch
	}
	var doc map[string]any
	if err := json.Unmarshal(patch, &doc); err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	for _, field := range []string{"data", "stringData"} {
		values, ok := doc[field].(map[string]any)
		if !ok {
			if doc[field] != nil {
				doc[field] = Redacted
			}
			continue
		}
		for k, v := range values {
			if v != nil {
				values[k] = Redacted
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	return out
}
