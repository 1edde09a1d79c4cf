package output_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/output"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    output.Format
		wantErr bool
	}{
		{"", output.Table, false},
		{"table", output.Table, false},
		{"YAML", output.YAML, false},
		{"json", output.JSON, false},
		{"xml", "", true},
	}
	for _, tt := range tests {
		got, err := output.Parse(tt.in)
		if tt.wantErr {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestPrint(t *testing.T) {
	v := struct {
		Name  string `json:"name"`
		Ready int    `json:"ready"`
	}{"web", 3}
	rows := output.Rows{Header: []string{"NAME", "READY"}, Rows: [][]string{{"web", "3"}}}
	tests := []struct {
		format output.Format
		want   string
	}{
		{output.Table, "NAME   READY\nweb    3\n"},
		{output.YAML, "name: web\nready: 3\n"},
		{output.JSON, "{\n  \"name\": \"web\",\n  \"ready\": 3\n}\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		require.NoError(t, output.Print(&buf, tt.format, v, rows))
		assert.Equal(t, tt.want, buf.String(), tt.format)
	}
}
