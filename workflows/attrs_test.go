package workflows

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFitsClusterAttr(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("vc-%04d", i)
		}
		return out
	}
	assert.True(t, fitsClusterAttr(nil))
	assert.True(t, fitsClusterAttr(names(100)), "a full batch of short names fits")
	assert.False(t, fitsClusterAttr(names(200)), "200 names of 7 characters exceed Temporal's 2 KiB")
	assert.False(t, fitsClusterAttr(names(1000)))
}
