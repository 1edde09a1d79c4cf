package testenv

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	start := time.Now()
	pg := StartPostgres(t)
	t.Logf("PostgreSQL ready in %s", time.Since(start).Round(time.Millisecond))

	assert.Equal(t, "postgres", pg.User())
	host, _, err := net.SplitHostPort(pg.Addr())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	conn, err := net.DialTimeout("tcp", pg.Addr(), time.Second)
	require.NoError(t, err)
	_ = conn.Close() // only reachability mattered

	binDir, err := postgresBinDir()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, pgIsReady(ctx, filepath.Join(binDir, "pg_isready"), mustPort(t, pg.Addr())))
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	addrPort, err := net.ResolveTCPAddr("tcp", addr)
	require.NoError(t, err)
	return addrPort.Port
}

func TestNewestVersionDir(t *testing.T) {
	tests := []struct {
		name string
		dirs []string
		want string
	}{
		{name: "none", dirs: nil, want: ""},
		{name: "one", dirs: []string{"/usr/lib/postgresql/15/bin"}, want: "/usr/lib/postgresql/15/bin"},
		{
			name: "numeric, not lexical, order",
			dirs: []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/13/bin"},
			want: "/usr/lib/postgresql/16/bin",
		},
		{
			name: "names that are not versions are ignored",
			dirs: []string{"/usr/lib/postgresql/latest/bin", "/usr/lib/postgresql/12/bin"},
			want: "/usr/lib/postgresql/12/bin",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, newestVersionDir(tt.dirs))
		})
	}
}

func TestLogScanner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.log")
	appendLog := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		_, err = f.WriteString(s)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	var l logScanner
	const prefix = "Temporal server ready 127.0.0.1:7233"

	appendLog(`{"level":"warn","msg":"Temporal server ready soon"}` + "\n")
	require.Error(t, l.find(path, prefix))
	appendLog("Temporal server ready 127.0.0.1:72") // a line still being written
	require.Error(t, l.find(path, prefix))
	appendLog("33\n")
	require.NoError(t, l.find(path, prefix))
}
