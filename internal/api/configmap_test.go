package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// ConfigMaps and Secrets of any type and keys decode (downstreamResources
// sources); fields Flotilla does not keep are warned about, as for the
// other kinds.
func TestDecode_ConfigMapAndAnySecret(t *testing.T) {
	docs, err := api.Decode(strings.NewReader(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a, uid: 1234}
data: {mode: fast, "app.properties": "a=b"}
binaryData: {blob: AAEC}
immutable: true
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
data: {tls.crt: Y2VydA==, tls.key: a2V5}
stringData: {ca.crt: ca}
`), "in.yaml")
	require.NoError(t, err)
	require.Len(t, docs, 2)

	cm := docs[0].ConfigMap
	require.NotNil(t, cm)
	assert.Equal(t, api.KindConfigMap, docs[0].Kind())
	assert.Equal(t, "team-a/settings", docs[0].Name())
	assert.Equal(t, map[string]string{"mode": "fast", "app.properties": "a=b"}, cm.Data)
	assert.Equal(t, map[string][]byte{"blob": {0, 1, 2}}, cm.BinaryData)
	assert.Equal(t, []string{`in.yaml#1: ConfigMap team-a/settings: unknown field "immutable" (ignored)`}, docs[0].Warnings,
		"metadata.uid is Kubernetes metadata, immutable is not kept")

	sec := docs[1].Secret
	require.NotNil(t, sec)
	assert.Equal(t, api.DefaultNamespace, sec.Metadata.Namespace)
	assert.Equal(t, "kubernetes.io/tls", sec.Type)
	assert.Equal(t, map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key"), "ca.crt": []byte("ca")}, sec.AllData())
	assert.Error(t, sec.ValidateCredentials(), "not a credential secret")
	assert.Empty(t, docs[1].Warnings)
}
