package httpserver_test

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/httpserver"
)

var full = httpserver.Timeouts{ReadHeader: time.Second, Read: 2 * time.Second, Write: 3 * time.Second, Idle: 4 * time.Second}

// A server is built with every timeout set, or not at all.
func TestNew(t *testing.T) {
	srv, err := httpserver.New(http.NotFoundHandler(), full)
	require.NoError(t, err)
	assert.Equal(t, time.Second, srv.ReadHeaderTimeout)
	assert.Equal(t, 2*time.Second, srv.ReadTimeout)
	assert.Equal(t, 3*time.Second, srv.WriteTimeout)
	assert.Equal(t, 4*time.Second, srv.IdleTimeout)
	assert.Equal(t, httpserver.MaxHeaderBytes, srv.MaxHeaderBytes)

	tests := []struct {
		field string
		unset func(*httpserver.Timeouts)
	}{
		{"ReadHeader", func(t *httpserver.Timeouts) { t.ReadHeader = 0 }},
		{"Read", func(t *httpserver.Timeouts) { t.Read = 0 }},
		{"Write", func(t *httpserver.Timeouts) { t.Write = -time.Second }},
		{"Idle", func(t *httpserver.Timeouts) { t.Idle = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			to := full
			tt.unset(&to)
			srv, err := httpserver.New(http.NotFoundHandler(), to)
			var te *httpserver.TimeoutError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.field, te.Field)
			assert.Nil(t, srv)
		})
	}
	_, err = httpserver.New(http.NotFoundHandler(), httpserver.Timeouts{})
	require.Error(t, err, "the zero value is refused")
}

// A client that opens a connection and sends its headers slowly is cut
// off after ReadHeader, on a real listener.
func TestNew_SlowHeadersAreCutOff(t *testing.T) {
	to := full
	to.ReadHeader = 200 * time.Millisecond
	srv, err := httpserver.New(http.NotFoundHandler(), to)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }() // ends with ErrServerClosed at Close
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")) // never ends its headers
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = bufio.NewReader(conn).ReadString('\n')
	require.Error(t, err, "the server closed the connection")
	assert.Less(t, time.Since(start), 4*time.Second, "closed by ReadHeader, not the test's deadline")
}
