package main

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

func TestLimitFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    bundle.Limits
		chart   int64
		wantErr string
	}{
		{name: "defaults", want: bundle.Limits{File: sizelimit.DefaultFile, Bundle: sizelimit.DefaultCheckout}, chart: chartfetch.DefaultMaxArchiveSize},
		{name: "raised", args: []string{"--max-file-size=20Mi", "--max-checkout-size=1Gi", "--max-chart-size=50M"},
			want: bundle.Limits{File: 20 << 20, Bundle: 1 << 30}, chart: 50_000_000},
		{name: "plain bytes", args: []string{"--max-file-size=1048576"}, want: bundle.Limits{File: 1 << 20, Bundle: sizelimit.DefaultCheckout}, chart: chartfetch.DefaultMaxArchiveSize},
		{name: "not a size", args: []string{"--max-index-size=lots"}, wantErr: `"lots" is not a size`},
		{name: "zero", args: []string{"--max-chart-unpacked-size=0"}, wantErr: "not a positive"},
		{name: "fraction of a byte", args: []string{"--max-file-size=0.5"}, wantErr: "not a positive whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l limitFlags
			fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
			l.bindFlags(fs)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			st := &stores{git: gitsource.NewCache(t.TempDir()), charts: &chartfetch.Fetcher{}}
			l.apply(st)
			assert.Equal(t, tt.want, st.limits)
			assert.Equal(t, tt.want.Bundle, st.git.MaxCheckoutSize)
			assert.Equal(t, tt.chart, st.charts.MaxArchiveSize)
			assert.Equal(t, chartfetch.DefaultMaxIndexSize, st.charts.MaxIndexSize)
		})
	}
}
