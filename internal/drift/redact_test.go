package drift_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/drift"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, apiVersion, kind, patch, want string
	}{
		{name: "Secret data and stringData values", apiVersion: "v1", kind: "Secret",
			patch: `{"data":{"password":"aHVudGVyMg==","gone":null},"stringData":{"token":"abc"},"metadata":{"labels":{"a":"b"}}}`,
			want:  `{"data":{"password":"(redacted)","gone":null},"stringData":{"token":"(redacted)"},"metadata":{"labels":{"a":"b"}}}`},
		{name: "a whole data map put back", apiVersion: "v1", kind: "Secret",
			patch: `{"data":"not-a-map"}`, want: `{"data":"(redacted)"}`},
		{name: "data removed", apiVersion: "v1", kind: "Secret", patch: `{"data":null}`, want: `{"data":null}`},
		{name: "not JSON", apiVersion: "v1", kind: "Secret", patch: `{`, want: `"(redacted)"`},
		{name: "ConfigMaps are shown", apiVersion: "v1", kind: "ConfigMap",
			patch: `{"data":{"value":"v1"}}`, want: `{"data":{"value":"v1"}}`},
		{name: "another group's Secret kind is not core", apiVersion: "example.com/v1", kind: "Secret",
			patch: `{"data":{"value":"v1"}}`, want: `{"data":{"value":"v1"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(drift.Redact(tt.apiVersion, tt.kind, []byte(tt.patch)))
			if tt.want[0] == '{' {
				assert.JSONEq(t, tt.want, got)
			} else {
				assert.Equal(t, tt.want, got)
			}
			assert.NotContains(t, got, "aHVudGVyMg==")
			if tt.kind == "Secret" && tt.apiVersion == "v1" {
				assert.NotContains(t, got, "abc")
			}
		})
	}
}

func TestShownPatch(t *testing.T) {
	small := []byte(`{"data":{"a":"b"}}`)
	assert.Equal(t, string(small), drift.ShownPatch(small))
	big := []byte(`{"data":{"a":"` + strings.Repeat("x", drift.MaxPatch) + `"}}`)
	got := drift.ShownPatch(big)
	assert.Less(t, len(got), 200, "a long patch is not carried")
	assert.True(t, json.Valid([]byte(got)), "still JSON: %s", got)
	assert.Contains(t, got, fmt.Sprint(len(big)), "it says how long the patch is")
}
