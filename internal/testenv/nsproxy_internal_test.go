package testenv

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A token split across reads is still replaced, and what cannot be the
// start of one is handed over at once (a watch event must not wait for
// the next).
func TestReplacer_SplitTokensAndStreaming(t *testing.T) {
	const in = `{"namespace":"shared-ns"}` + "\n" + `{"a":"shared-nsshared-n","b":"shared-ns"}` + "\n"
	want := strings.ReplaceAll(in, "shared-ns", "backing-a")
	for _, size := range []int{1, 2, 3, 7, 100} {
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < len(in); i += size {
				_, _ = pw.Write([]byte(in[i:min(i+size, len(in))]))
			}
			_ = pw.Close()
		}()
		out, err := io.ReadAll(&replacer{r: pr, old: []byte("shared-ns"), new: []byte("backing-a")})
		require.NoError(t, err)
		assert.Equal(t, want, string(out), "reads of %d bytes", size)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	x := &replacer{r: pr, old: []byte("shared-ns"), new: []byte("backing-a")}
	go func() { _, _ = pw.Write([]byte(`{"namespace":"shared-ns"}` + "\n")) }()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 100)
		n, _ := x.Read(buf)
		got <- buf[:n]
	}()
	select {
	case b := <-got:
		assert.True(t, bytes.Equal([]byte(`{"namespace":"backing-a"}`+"\n"), b), "got %q", b)
	case <-time.After(5 * time.Second):
		t.Fatal("a complete event was held back")
	}
}

func TestPartialSuffix(t *testing.T) {
	for data, want := range map[string]int{"": 0, "abc": 0, "xx shar": 4, "shared-n": 8, "shared-ns": 1, "s": 1} {
		assert.Equal(t, want, partialSuffix([]byte(data), []byte("shared-ns")), "%q", data)
	}
}
