package sizelimit_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// counting is an endless source of 'x' that counts what was taken from it.
type counting struct{ n int64 }

func (c *counting) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n += int64(len(p))
	return len(p), nil
}

func TestLimitReadAll(t *testing.T) {
	tests := []struct {
		name    string
		max     int64
		input   int64 // bytes in the input; -1: endless
		wantErr bool
	}{
		{name: "under", max: 10, input: 9},
		{name: "exactly", max: 10, input: 10},
		{name: "one over", max: 10, input: 11, wantErr: true},
		{name: "endless", max: 1 << 20, input: -1, wantErr: true},
		{name: "no limit", max: 0, input: 1 << 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &counting{}
			var r io.Reader = src
			if tt.input >= 0 {
				r = io.LimitReader(src, tt.input)
			}
			l := sizelimit.Limit{Max: tt.max, Flag: "max-file-size"}
			got, err := l.ReadAll(r, "app/big.yaml")
			if !tt.wantErr {
				require.NoError(t, err)
				assert.Len(t, got, int(tt.input))
				return
			}
			var se *sizelimit.Error
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, sizelimit.ErrTooLarge)
			assert.Equal(t, outcome.Invalid, se.Class())
			assert.Equal(t, tt.max, se.Limit)
			assert.LessOrEqual(t, src.n, tt.max+1, "the reader stops one byte past the limit")
			assert.LessOrEqual(t, int64(len(got)), tt.max, "no byte past the limit is handed out")
			assert.Contains(t, err.Error(), "app/big.yaml")
			assert.Contains(t, err.Error(), "--max-file-size")
		})
	}
}

func TestErrorMessage(t *testing.T) {
	err := sizelimit.Limit{Max: 10 << 20, Flag: "max-file-size"}.Error("app/cm.yaml")
	assert.Equal(t, "app/cm.yaml: over the limit of 10Mi (raise it with flotilla-worker --max-file-size)", err.Error())
	assert.Equal(t, "over the limit of 1500", sizelimit.Limit{Max: 1500}.Error("").Error())
	assert.Equal(t, "1500", sizelimit.Format(1500))
}

func TestReadFileChecksSizeFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("y"), 100), 0o600))
	l := sizelimit.Limit{Max: 99}
	_, err := l.ReadFile(path, "f")
	require.ErrorIs(t, err, sizelimit.ErrTooLarge)
	got, err := sizelimit.Limit{Max: 100}.ReadFile(path, "f")
	require.NoError(t, err)
	assert.Len(t, got, 100)
	_, err = l.ReadFile(filepath.Join(dir, "missing"), "missing")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestBudgetIsShared(t *testing.T) {
	b := sizelimit.NewBudget(sizelimit.Limit{Max: 25, Flag: "max-checkout-size"})
	for i, name := range []string{"a", "b"} {
		got, err := io.ReadAll(b.Reader(strings.NewReader(strings.Repeat("z", 10)), name))
		require.NoError(t, err, "file %d", i)
		assert.Len(t, got, 10)
	}
	src := &counting{}
	_, err := io.ReadAll(b.Reader(src, "c"))
	var se *sizelimit.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "c", se.What, "the error names the input that went over")
	assert.LessOrEqual(t, src.n, int64(6), "the third reader stops once the budget is spent")
	assert.Equal(t, int64(26), b.Used())
	_, err = b.Reader(strings.NewReader("more"), "d").Read(make([]byte, 4))
	assert.True(t, errors.Is(err, sizelimit.ErrTooLarge), "a spent budget refuses further reads")
}
