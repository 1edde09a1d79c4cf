package bundle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// TestReadLimits checks that every repository file a bundle read takes
// is bounded: one over the file limit, or files over the bundle's limit
// together, fail the bundle with a ValidationError naming the bundle, the
// file, the limit and the flag that raises it.
func TestReadLimits(t *testing.T) {
	big := strings.Repeat("# padding\n", 20) // 200 bytes
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	tests := []struct {
		name   string
		files  map[string]string
		limits bundle.Limits
		path   string // the file named
		flag   string
	}{
		{name: "manifest file", files: map[string]string{"app/cm.yaml": cm + big},
			limits: bundle.Limits{File: 100}, path: "app/cm.yaml", flag: sizelimit.FileFlag},
		{name: "fleet.yaml", files: map[string]string{"app/fleet.yaml": "defaultNamespace: x\n" + big, "app/cm.yaml": cm},
			limits: bundle.Limits{File: 100}, path: "app/fleet.yaml", flag: sizelimit.FileFlag},
		{name: "values file", files: map[string]string{
			"app/fleet.yaml": "helm:\n  valuesFiles: [values/v.yaml]\n", "app/values/v.yaml": "a: 1\n" + big, "app/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n"},
			limits: bundle.Limits{File: 150}, path: "app/values/v.yaml", flag: sizelimit.FileFlag},
		{name: "fleetignore", files: map[string]string{"app/.fleetignore": "*.md\n" + big, "app/cm.yaml": cm},
			limits: bundle.Limits{File: 100}, path: "app/.fleetignore", flag: sizelimit.FileFlag},
		{name: "files together", files: map[string]string{"app/a.yaml": cm + big, "app/b.yaml": cm + big, "app/c.yaml": cm + big},
			limits: bundle.Limits{File: 1000, Bundle: 600}, path: "app/c.yaml", flag: sizelimit.CheckoutFlag},
		{name: "a file linked twice counts twice", files: map[string]string{"app/a.yaml": cm + big, "app/b.yaml": "->a.yaml"},
			limits: bundle.Limits{File: 1000, Bundle: 400}, path: "app/b.yaml", flag: sizelimit.CheckoutFlag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			_, _, err := (&bundle.Reader{Limits: tt.limits}).Read(context.Background(), root, "app", "repo")
			var ve *bundle.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.ErrorIs(t, err, sizelimit.ErrTooLarge)
			assert.Equal(t, tt.path, ve.Path)
			assert.Equal(t, "repo-app", ve.Bundle)
			assert.Contains(t, err.Error(), "bundle repo-app: "+tt.path+": ")
			assert.Contains(t, err.Error(), "raise it with flotilla-worker --"+tt.flag)

			// The same bundle reads with the default limits.
			_, _, err = (&bundle.Reader{}).Read(context.Background(), root, "app", "repo")
			assert.NoError(t, err)
		})
	}
}
