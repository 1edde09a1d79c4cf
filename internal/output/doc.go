// Package output prints CLI results in the format chosen with -o: an aligned
// table for people, or YAML or JSON for scripts. Commands hand it one value
// plus a table form; the value's json tags define both YAML and JSON output.
package output
