package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// limitFlags are the size limits of untrusted input: repository files and
// checkouts, Helm repository indexes and chart archives. Each is checked
// while reading; content over a limit fails its bundle (Invalid, not
// retried) with a message naming the file or URL, the limit and the flag.
type limitFlags struct {
	File, Checkout, Chart, ChartUnpacked, Index byteSize
}

func (l *limitFlags) bindFlags(fs *pflag.FlagSet) {
	l.File = byteSize(sizelimit.DefaultFile)
	l.Checkout = byteSize(sizelimit.DefaultCheckout)
	l.Chart = byteSize(chartfetch.DefaultMaxArchiveSize)
	l.ChartUnpacked = byteSize(chartfetch.DefaultMaxUnpackedSize)
	l.Index = byteSize(chartfetch.DefaultMaxIndexSize)
	fs.Var(&l.File, sizelimit.FileFlag, "largest repository file read while rendering (fleet.yaml, values files, manifests), e.g. 10Mi")
	fs.Var(&l.Checkout, sizelimit.CheckoutFlag, "largest checkout of a commit (its files together), and of one bundle's files together")
	fs.Var(&l.Chart, sizelimit.ChartFlag, "largest chart archive downloaded (compressed), and OCI manifest or layer")
	fs.Var(&l.ChartUnpacked, sizelimit.ChartUnpackedFlag, "largest chart archive decompressed (its files together); Helm refuses charts over 100Mi regardless")
	fs.Var(&l.Index, sizelimit.IndexFlag, "largest Helm repository index.yaml downloaded")
}

// apply sets the limits on the stores' Git cache, chart fetcher and
// bundle reader limits (activities.Activities.Limits), before the workers
// start.
// Unset limits (options built without flags) keep the stores' defaults.
func (l limitFlags) apply(st *stores) {
	set := func(dst *int64, v byteSize) {
		if v > 0 {
			*dst = int64(v)
		}
	}
	set(&st.git.MaxCheckoutSize, l.Checkout)
	set(&st.charts.MaxArchiveSize, l.Chart)
	set(&st.charts.MaxUnpackedSize, l.ChartUnpacked)
	set(&st.charts.MaxIndexSize, l.Index)
	set(&st.limits.File, l.File)
	set(&st.limits.Bundle, l.Checkout)
}

// byteSize is a flag of a number of bytes, written as a Kubernetes
// quantity: 10Mi, 1Gi, 500k, 1048576.
type byteSize int64

func (b *byteSize) String() string { return sizelimit.Format(int64(*b)) }

// Set parses a positive quantity of bytes.
func (b *byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a size such as 10Mi: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("%q is not a positive whole number of bytes", s)
	}
	*b = byteSize(n)
	return nil
}

// Type names the flag's value in --help.
func (b *byteSize) Type() string { return "size" }
