package deployer_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// apiGroups selects the requests for the server's API groups: Helm makes
// one each time it reads the cluster's capabilities.
func apiGroups(req *http.Request) bool {
	return req.Method == http.MethodGet && req.URL.Path == "/apis"
}

// hasThingsTemplate renders ConfigMap caps whose "has" says whether the
// cluster serves <group>/v1, as a chart asks .Capabilities.
func hasThingsTemplate(group string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata:
  name: caps
data:
  has: {{ ternary "yes" "no" (.Capabilities.APIVersions.Has "` + group + `/v1") | quote }}
`
}

// TestDeploy_Capabilities: the deploys of one cluster share its
// capabilities (Helm alone reads the whole discovery again for each
// install and upgrade), and a release that brings new API versions makes
// the next deploy see them.
func TestDeploy_Capabilities(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	d := newDeployer(t)
	cfg, n := f.countingConfig(apiGroups)
	getter, err := deployer.NewRESTClientGetter(cfg, metav1.NamespaceDefault)
	require.NoError(t, err)
	// Within the test, only a CRD makes the capabilities be read again.
	deployer.SetCapabilitiesTTL(getter, time.Hour)

	k := thingKind{group: "caps.flotilla.test"}
	for _, ns := range []string{"caps-a", "caps-b", "caps-c"} {
		rel := testRelease(ns, "app", "id-1", "v")
		rel.Chart = testChart(hasThingsTemplate(k.group))
		_, err := d.Deploy(ctx, getter, rel)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"has": "no"}, f.configMap(ctx, t, ns, "caps").Data)
	}
	assert.Equal(t, int64(1), n.Load(), "three deploys, one read of the capabilities")

	// A release of this controller installs the CRD: the next deploy's
	// templates see its API version at once.
	_, err = d.Deploy(ctx, getter, thingRelease(k, "caps-crd", "things", "id-1", "v"))
	require.NoError(t, err)
	rel := testRelease("caps-d", "app", "id-1", "v")
	rel.Chart = testChart(hasThingsTemplate(k.group))
	_, err = d.Deploy(ctx, getter, rel)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"has": "yes"}, f.configMap(ctx, t, "caps-d", "caps").Data)
}
