package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Format is an output format.
type Format string

// The supported formats.
const (
	Table Format = "table"
	YAML  Format = "yaml"
	JSON  Format = "json"
)

// Formats lists the accepted values of -o, for help text and completion.
func Formats() []string { return []string{string(Table), string(YAML), string(JSON)} }

// Parse checks a -o value.
func Parse(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case Table, YAML, JSON:
		return f, nil
	case "":
		return Table, nil
	default:
		return "", fmt.Errorf("invalid output format %q: want table, yaml or json", s)
	}
}

// Rows is the table form of a result: a header and rows of cells.
type Rows struct {
	Header []string
	Rows   [][]string
}

// Print writes v in format f. For Table it writes rows; for YAML and JSON it
// marshals v.
func Print(w io.Writer, f Format, v any, rows Rows) error {
	switch f {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encode JSON: %w", err)
		}
		return nil
	case YAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	default:
		return printTable(w, rows)
	}
}

func printTable(w io.Writer, rows Rows) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if len(rows.Header) > 0 {
		fmt.Fprintln(tw, strings.Join(rows.Header, "\t"))
	}
	for _, r := range rows.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
