package codec_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/flotilla-gitops/flotilla/internal/codec"
)

const (
	testToken = "codec-token-3Jd9"
	uiOrigin  = "http://127.0.0.1:8233"
)

// encryptedBody returns a /decode request body holding v encrypted by c,
// as the Temporal UI sends it: protojson Payloads.
func encryptedBody(t *testing.T, c *codec.Codec, v any) string {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	enc, err := c.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	require.NoError(t, err)
	return string(b)
}

func TestHandler(t *testing.T) {
	c := testCodec(t, testKey(t, "fk-1"))
	body := encryptedBody(t, c, map[string]string{"cluster": "prod-eu"})
	withToken := codec.HandlerOptions{Token: testToken, AllowedOrigins: []string{uiOrigin}}

	tests := []struct {
		name       string
		opts       codec.HandlerOptions
		method     string
		header     map[string]string
		remote     string // the peer; default httptest's 192.0.2.1
		wantStatus int
		wantHeader map[string]string // response headers that must be set
		wantBody   string            // a substring of the response body
	}{
		{
			name: "preflight from an allowed origin needs no token", opts: withToken, method: http.MethodOptions,
			header:     map[string]string{"Origin": uiOrigin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type,x-namespace"},
			wantStatus: http.StatusNoContent,
			wantHeader: map[string]string{
				"Access-Control-Allow-Origin":  uiOrigin,
				"Access-Control-Allow-Methods": "POST, OPTIONS",
				"Access-Control-Allow-Headers": "Authorization, Authorization-Extras, Content-Type, X-Namespace",
			},
		},
		{
			name: "preflight with credentials", opts: codec.HandlerOptions{Token: testToken, AllowedOrigins: []string{"*"}, AllowCredentials: true},
			method: http.MethodOptions, header: map[string]string{"Origin": "https://ui.example.com", "Access-Control-Request-Method": "POST"},
			wantStatus: http.StatusNoContent,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": "https://ui.example.com", "Access-Control-Allow-Credentials": "true"},
		},
		{
			name: "preflight from another origin", opts: withToken, method: http.MethodOptions,
			header:     map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "no token", opts: withToken, method: http.MethodPost,
			header:     map[string]string{"Content-Type": "application/json"},
			wantStatus: http.StatusUnauthorized, wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="flotilla-codec"`},
		},
		{
			name: "wrong token", opts: withToken, method: http.MethodPost,
			header:     map[string]string{"Authorization": "Bearer " + testToken + "x"},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "token in another scheme", opts: withToken, method: http.MethodPost,
			header:     map[string]string{"Authorization": "Basic " + testToken},
			wantStatus: http.StatusUnauthorized,
		},
		{
			name: "decode from the UI", opts: withToken, method: http.MethodPost,
			header: map[string]string{"Origin": uiOrigin, "Authorization": "Bearer " + testToken,
				"Content-Type": "application/json", "X-Namespace": "default"},
			wantStatus: http.StatusOK,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": uiOrigin, "Content-Type": "application/json"},
			wantBody:   `"data":"` + b64(`{"cluster":"prod-eu"}`) + `"`,
		},
		{
			name: "decode without an Origin (CLI), lower-case scheme", opts: withToken, method: http.MethodPost,
			header:     map[string]string{"Authorization": "bearer " + testToken},
			wantStatus: http.StatusOK, wantBody: b64("json/plain"),
		},
		{
			name: "tokenless origin on loopback", opts: codec.HandlerOptions{TokenlessOrigin: uiOrigin}, method: http.MethodPost,
			header: map[string]string{"Origin": uiOrigin}, remote: "127.0.0.1:51234",
			wantStatus: http.StatusOK, wantHeader: map[string]string{"Access-Control-Allow-Origin": uiOrigin}, wantBody: b64("json/plain"),
		},
		{
			name: "tokenless origin from another host", opts: codec.HandlerOptions{TokenlessOrigin: uiOrigin}, method: http.MethodPost,
			header: map[string]string{"Origin": uiOrigin}, wantStatus: http.StatusUnauthorized,
		},
		{
			name: "tokenless origin: loopback without the Origin", opts: codec.HandlerOptions{TokenlessOrigin: uiOrigin}, method: http.MethodPost,
			remote: "[::1]:51234", wantStatus: http.StatusUnauthorized,
		},
		{
			name: "no token configured refuses everyone", opts: codec.HandlerOptions{}, method: http.MethodPost,
			header: map[string]string{"Authorization": "Bearer "}, remote: "127.0.0.1:51234", wantStatus: http.StatusUnauthorized,
		},
		{
			name: "POST from an origin not allowed", opts: withToken, method: http.MethodPost,
			header:     map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + testToken},
			wantStatus: http.StatusForbidden,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rd io.Reader
			if tt.method == http.MethodPost {
				rd = strings.NewReader(body)
			}
			req := httptest.NewRequest(tt.method, "/codec/decode?preserveStorageRefs=true", rd)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.remote != "" {
				req.RemoteAddr = tt.remote
			}
			rec := httptest.NewRecorder()
			codec.Handler(c, tt.opts).ServeHTTP(rec, req)

			require.Equal(t, tt.wantStatus, rec.Code, rec.Body.String())
			for k, v := range tt.wantHeader {
				assert.Equal(t, v, rec.Header().Get(k), k)
			}
			if tt.wantStatus != http.StatusOK && tt.wantStatus != http.StatusNoContent {
				assert.Empty(t, rec.Header().Get("Access-Control-Allow-Credentials"))
			}
			assert.Contains(t, rec.Body.String(), tt.wantBody)
			assert.NotContains(t, rec.Body.String(), testToken)
		})
	}
}

// The SDK's remote codec (what `temporal --codec-endpoint --codec-auth`
// uses) round-trips through the handler over real HTTP.
func TestHandlerRemoteCodec(t *testing.T) {
	c := testCodec(t, testKey(t, "fk-1"))
	mux := http.NewServeMux()
	mux.Handle("/codec/", codec.Handler(c, codec.HandlerOptions{Token: testToken}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	remote := func(token string) converter.PayloadCodec {
		return converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
			Endpoint: srv.URL + "/codec",
			ModifyRequest: func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer "+token)
				return nil
			},
		})
	}
	p, err := converter.GetDefaultDataConverter().ToPayload("hello")
	require.NoError(t, err)
	enc, err := remote(testToken).Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	require.True(t, codec.Encrypted(enc[0]))
	dec, err := c.Decode(enc)
	require.NoError(t, err)
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &s))
	assert.Equal(t, "hello", s)

	dec, err = remote(testToken).Decode(enc)
	require.NoError(t, err)
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &s))
	assert.Equal(t, "hello", s)

	_, err = remote("wrong").Decode(enc)
	require.ErrorContains(t, err, "Unauthorized")
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
