package fleetyaml_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func TestReleaseName(t *testing.T) {
	const (
		str50 = "1234567890" + "1234567890" + "1234567890" + "1234567890" + "1234567890"
		str53 = str50 + "123"
		str63 = str50 + "1234567890" + "123"
	)
	// Expected values are what Fleet's names.HelmReleaseName returns for
	// the same inputs, so bundles keep their Fleet names.
	tests := []struct {
		in   string
		want string
	}{
		{"simple", "simple"},
		{"fleet-examples/simple", "fleet-examples-simple"},
		{"repo/single-cluster/helm", "repo-single-cluster-helm"},
		{str53, str53},
		{str53 + "a", "12345678901234567890123456789012345678901234567-fdba4"},
		{str63 + "a", "12345678901234567890123456789012345678901234567-eb12d"},
		{"long-name-test-shortpath-with@char", "long-name-test-shortpath-with-char-031bab5e"},
		{"long-name-test-shortpath-with+char", "long-name-test-shortpath-with-char-21c88393"},
		{"long-name-test-0.App_ ", "long-name-test-0-app-5bf6b3fb"},
		{"long-name-test--App_-_12.factor", "long-name-test-app-12-factor-0efbac37"},
		{"bundle.name.example.com", "bundle-name-example-com-645ef821"},
		// The cut lands right after a "-": no double dash, one char shorter.
		{str53[0:46] + "-1234567", "1234567890123456789012345678901234567890123456-d0bce"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := fleetyaml.ReleaseName(tt.in)
			assert.Equal(t, tt.want, got)
			assert.True(t, fleetyaml.ValidReleaseName(got), got)
		})
	}
}

func TestReleaseNameAlwaysValid(t *testing.T) {
	inputs := []string{
		"", "-", "---", "/", "..", "_", "ÄÖÜ", "日本語", "a", "A", "-a-", "a--b", "a..b",
		"repo/" + strings.Repeat("x", 100), strings.Repeat("Ab_/", 40), strings.Repeat("-", 60),
		strings.Repeat("a-", 30), "UPPER/Case/Path", "with space/and\ttab", "trailing-/",
	}
	for i := range 200 {
		inputs = append(inputs, fmt.Sprintf("repo-%d/%s/%d", i, strings.Repeat("dir.", i%20), i*7919))
	}
	for _, in := range inputs {
		got := fleetyaml.ReleaseName(in)
		assert.True(t, fleetyaml.ValidReleaseName(got), "fleetyaml.ReleaseName(%q) = %q", in, got)
		assert.LessOrEqual(t, len(got), fleetyaml.MaxReleaseNameLen, in)
	}
}

func TestReleaseNameDistinct(t *testing.T) {
	prefix := "my-git-repository/" + strings.Repeat("deeply/nested/", 5)
	seen := map[string]string{}
	for i := range 500 {
		in := fmt.Sprintf("%sapp-%03d", prefix, i)
		got := fleetyaml.ReleaseName(in)
		if prev, dup := seen[got]; dup {
			t.Fatalf("fleetyaml.ReleaseName(%q) = fleetyaml.ReleaseName(%q) = %q", in, prev, got)
		}
		seen[got] = in
	}
	// Case and character differences do not collide either.
	assert.NotEqual(t, fleetyaml.ReleaseName("repo/App"), fleetyaml.ReleaseName("repo/app"))
	assert.NotEqual(t, fleetyaml.ReleaseName("repo/a_b"), fleetyaml.ReleaseName("repo/a.b"))
}

func TestValidReleaseName(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"guestbook", true},
		{"a.b-c", true},
		{"0abc", true},
		{strings.Repeat("a", 53), true},
		{strings.Repeat("a", 54), false},
		{"", false},
		{"Upper", false},
		{"-lead", false},
		{"trail-", false},
		{"a..b", false},
		{"under_score", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, fleetyaml.ValidReleaseName(tt.in), tt.in)
	}
}
