package bundle

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckHelmOp(t *testing.T) {
	unknown, err := CheckHelmOp("op.yaml#1", "web", json.RawMessage(
		`{"helm":{"repo":"https://c.example","chart":"web","chrat":"x"},"defaultNamespace":"web","targetz":[]}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"helm.chrat", "targetz"}, unknown)

	_, err = CheckHelmOp("op.yaml#1", "web", json.RawMessage(`{"helm":{"chart":"web","maxHistory":"many"}}`))
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	assert.Equal(t, "helm.maxHistory", ve.Field)
	assert.Contains(t, err.Error(), "bundle web: op.yaml#1")

	_, err = CheckHelmOp("op.yaml#1", "web", json.RawMessage(
		`{"helm":{"chart":"web"},"rolloutStrategy":{"maxUnavailable":"ten"}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rolloutStrategy")
}
