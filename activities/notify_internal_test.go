package activities

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/internal/notify"
)

// TestDeliver: the activity reads the Secret named in the spec itself
// (nothing secret is in its input) and maps each failure to its error
// type: transient (retryable, with the receiver's Retry-After), refused,
// and a Secret that does not exist; no error names the address.
func TestDeliver(t *testing.T) {
	var bodies [][]byte
	var sigs []string
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies, sigs = append(bodies, b), append(sigs, r.Header.Get(notify.HeaderSignature))
		w.Header().Set("Retry-After", "9")
		w.WriteHeader(code)
	}))
	defer srv.Close()
	secrets := &dataSecrets{data: map[string]map[string][]byte{"hook": {"token": []byte("k3y")}}}
	a := &Activities{Secrets: secrets}
	var suite testsuite.WorkflowTestSuite
	run := func(secret string) error {
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(a.Deliver)
		_, err := env.ExecuteActivity(a.Deliver, DeliverInput{Namespace: "ns", Notification: "n",
			Spec:  notify.Spec{Provider: notify.Webhook, Address: srv.URL + "/private-path", SecretRef: &notify.SecretRef{Name: secret}},
			Event: notify.Event{ID: "e1", Type: notify.RolloutFailed, Namespace: "ns"}})
		return err
	}

	require.NoError(t, run("hook"))
	require.Len(t, bodies, 1)
	assert.True(t, notify.Verify([]byte("k3y"), bodies[0], sigs[0]), "signed with the Secret's token")
	assert.Equal(t, []string{"ns/hook"}, secrets.loaded)

	tests := []struct {
		name      string
		code      int
		secret    string
		wantType  string
		retryable bool
	}{
		{"503 is retried", http.StatusServiceUnavailable, "hook", ErrTypeDeliveryFailed, true},
		{"400 is refused", http.StatusBadRequest, "hook", ErrTypeDeliveryRejected, false},
		{"a missing Secret", http.StatusOK, "gone", ErrTypeNotificationInvalid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code = tt.code
			err := run(tt.secret)
			var ae *temporal.ApplicationError
			require.True(t, errors.As(err, &ae), "got %v", err)
			assert.Equal(t, tt.wantType, ae.Type())
			assert.Equal(t, !tt.retryable, ae.NonRetryable())
			assert.NotContains(t, err.Error(), "private-path")
			if tt.retryable {
				assert.Equal(t, "9s", ae.NextRetryDelay().String(), "the receiver's Retry-After")
			}
		})
	}
}
