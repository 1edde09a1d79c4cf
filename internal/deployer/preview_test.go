package deployer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// capabilitiesTemplate shows what the templates see of the cluster.
const capabilitiesTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: caps
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  isUpgrade: {{ .Release.IsUpgrade | quote }}
  appsV1: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
`

// TestPreview: Preview renders a release as Deploy would, with the
// cluster's version and API versions and .Release.IsUpgrade set once it is
// installed, reports the deployed revision, says Unchanged (rendering
// nothing) at the deployed ID, fails as Deploy would for a missing
// ServiceAccount, and writes nothing: no namespace, no release record.
func TestPreview(t *testing.T) {
	f := newFixture(t)
	d := newDeployer(t)
	ctx := testContext(t)
	version, err := f.cs.Discovery().ServerVersion()
	require.NoError(t, err)
	rel := testRelease("preview-ns", "preview", "m:1", "one")
	rel.Chart = testChart(capabilitiesTemplate)

	pv, err := d.Preview(ctx, f.getter, rel)
	require.NoError(t, err)
	assert.False(t, pv.Installed)
	assert.False(t, pv.Unchanged)
	assert.Contains(t, pv.Manifest, `kubeVersion: "`+version.GitVersion+`"`)
	assert.NotEqual(t, deployer.DefaultKubeVersion, version.GitVersion, "the test needs a cluster of another version than the default")
	assert.Contains(t, pv.Manifest, `isUpgrade: "false"`)
	assert.Contains(t, pv.Manifest, `appsV1: "true"`)
	assert.Contains(t, pv.Manifest, `value: "one"`)
	_, err = f.cs.CoreV1().Namespaces().Get(ctx, "preview-ns", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "Preview created the namespace: %v", err)

	_, err = d.Deploy(ctx, f.getter, rel)
	require.NoError(t, err)
	pv, err = d.Preview(ctx, f.getter, rel)
	require.NoError(t, err)
	assert.True(t, pv.Installed)
	assert.True(t, pv.Unchanged)
	assert.Empty(t, pv.Manifest)
	assert.Equal(t, "m:1", pv.Current.DeploymentID)

	next := testRelease("preview-ns", "preview", "m:2", "two")
	next.Chart = rel.Chart
	pv, err = d.Preview(ctx, f.getter, next)
	require.NoError(t, err)
	assert.True(t, pv.Installed)
	assert.False(t, pv.Unchanged)
	assert.Equal(t, "m:1", pv.Current.DeploymentID)
	assert.NotEmpty(t, pv.Current.Objects)
	assert.Contains(t, pv.Manifest, `isUpgrade: "true"`)
	assert.Contains(t, pv.Manifest, `value: "two"`)
	assert.Len(t, f.history(t, "preview-ns", "preview"), 1, "Preview records nothing")

	next.ServiceAccount = "nobody"
	_, err = d.Preview(ctx, f.getter, next)
	require.ErrorIs(t, err, deployer.ErrServiceAccountNotFound)
}
