package outcome

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicy pins every class's row: a changed policy changes this table.
func TestPolicy(t *testing.T) {
	tests := []struct {
		class Class
		want  Policy
		// transient and failed are the wrappers' answers.
		transient, failed bool
	}{
		// Success: no state of its own, nothing to retry.
		{class: OK, want: Policy{}},
		// Retried by the rollout after a short pause; a later rollout
		// starts it at once; the cluster's cleanups wait.
		{class: Unreachable, transient: true, want: Policy{State: "WaitApplied", Retry: RetrySoon, ClusterWide: true,
			StartsAtOnce: true, Log: "Bundle not deployed"}},
		// Waits for the failure backoff; the cluster's cleanups wait.
		{class: Unauthorized, want: Policy{State: "WaitApplied", Retry: RetryAfterBackoff, ClusterWide: true,
			Log: "Bundle not deployed"}},
		{class: BundleFailed, failed: true, want: Policy{State: "ErrApplied", Retry: RetryAfterBackoff, Failed: true,
			Log: "Bundle failed"}},
		{class: Invalid, failed: true, want: Policy{State: "ErrApplied", Retry: RetryAfterBackoff, Failed: true,
			Log: "Bundle failed"}},
		{class: ContentUnavailable, transient: true, want: Policy{State: "WaitApplied", Retry: RetrySoon,
			Note: "content unavailable", Log: "Content unavailable"}},
		// A class this code does not know: shown as an error, not retried
		// on its own, not recorded.
		{class: "FromANewerWorker", want: Policy{State: "ErrApplied", Log: "Bundle failed"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.class), func(t *testing.T) {
			assert.Equal(t, tt.want, tt.class.Policy())
			assert.Equal(t, tt.transient, tt.class.Transient(), "Transient")
			assert.Equal(t, tt.failed, tt.class.Failed(), "Failed")
		})
	}
}

// TestEveryClassHasAPolicy checks that All lists every Class constant
// declared in this package, and that the table has a row for each and no
// other: a new class cannot fall through to Unclassified unnoticed.
func TestEveryClassHasAPolicy(t *testing.T) {
	declared := classConstants(t)
	assert.ElementsMatch(t, declared, All, "All lists every Class constant")
	assert.ElementsMatch(t, All, slices.Collect(maps.Keys(policies)), "the table has one row per class")
	assert.Len(t, declared, 7, "classConstants found the constants")
}

// classConstants returns the values of the constants of type Class the
// package's non-test files declare.
func classConstants(t *testing.T) []Class {
	t.Helper()
	files, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var out []Class
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f.Name(), nil, 0)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			out = append(out, classesIn(t, decl)...)
		}
	}
	return out
}

// classesIn returns the Class constants a declaration declares, written
// like the others: Name Class = "literal".
func classesIn(t *testing.T, decl ast.Decl) []Class {
	gd, ok := decl.(*ast.GenDecl)
	if !ok || gd.Tok != token.CONST {
		return nil
	}
	var out []Class
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Class" {
			continue
		}
		for _, v := range vs.Values {
			lit, ok := v.(*ast.BasicLit)
			require.True(t, ok && lit.Kind == token.STRING, "Class constant %s is a string literal", vs.Names[0].Name)
			val, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			out = append(out, Class(val))
		}
	}
	return out
}
