package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPick(t *testing.T) {
	ports, err := Pick("127.0.0.1", 20)
	require.NoError(t, err)
	require.Len(t, ports, 20)
	seen := map[int]bool{}
	lo := ephemeralStart()
	for _, p := range ports {
		assert.False(t, seen[p], "distinct")
		seen[p] = true
		if lo > lowest+1000 {
			assert.GreaterOrEqual(t, p, lowest)
			assert.Less(t, p, lo, "below the ephemeral range")
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "free after Pick returns")
		require.NoError(t, l.Close())
	}
}

// A port someone listens on is never returned.
func TestPick_SkipsTaken(t *testing.T) {
	var held []net.Listener
	taken := map[int]bool{}
	for range 50 {
		ps, err := Pick("127.0.0.1", 1)
		require.NoError(t, err)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[0])))
		require.NoError(t, err)
		held = append(held, l)
		taken[ps[0]] = true
	}
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	ports, err := Pick("127.0.0.1", 50)
	require.NoError(t, err)
	for _, p := range ports {
		assert.False(t, taken[p])
	}
}
