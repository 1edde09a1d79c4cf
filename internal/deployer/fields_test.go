package deployer_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// secondConfigMap renders a second ConfigMap, "second", with a typo'd
// field when value "typo" is set.
const secondConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: second
{{- if .Values.typo }}
dataa:
  value: lost
{{- else }}
data:
  value: kept
{{- end }}
`

// typoDeployment renders deploymentTemplate's Deployment with a typo'd
// container field.
const typoDeployment = deploymentTemplate + "        imagePullPolicyy: Always\n"

// dryRunCounter counts the dry-run creates a REST config's clients send.
// dryRun selects dry-run requests.
func dryRun(req *http.Request) bool {
	return req.Method == http.MethodPost && req.URL.Query().Get("dryRun") == "All"
}

// TestDeploy_UnknownFields: a rendered object with a field the cluster's
// schema does not know fails the deploy before anything is applied, with
// the server's message naming the field, the object and its template;
// without the check the API server would drop the field with a warning
// and the install "succeed". Verdicts are shared by every cluster serving
// the same schema: the same objects in another namespace cost no request.
func TestDeploy_UnknownFields(t *testing.T) {
	f := newFixture(t)

	t.Run("install with a typo applies nothing", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("typo-install", "app", "id-1", "one")
		rel.Chart = testChart(secondConfigMap, typoDeployment)
		rel.Values["typo"] = true

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrUnknownField)
		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		msg := err.Error()
		assert.Contains(t, msg, `ConfigMap second (probe/templates/extra-0.yaml)`)
		assert.Contains(t, msg, `unknown field "dataa"`)
		assert.Contains(t, msg, `Deployment web (probe/templates/extra-1.yaml)`)
		assert.Contains(t, msg, `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`)
		assert.NotContains(t, msg, "ConfigMap app", "the valid object is not blamed")
		f.assertNothingApplied(ctx, t, "typo-install", "app")
	})

	t.Run("upgrade with a typo keeps the deployed revision", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("typo-upgrade", "app", "id-1", "one")
		rel.Chart = testChart(secondConfigMap)
		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)

		bad := testRelease("typo-upgrade", "app", "id-2", "two")
		bad.Chart = testChart(secondConfigMap)
		bad.Values["typo"] = true
		_, err = d.Deploy(ctx, f.getter, bad)

		require.ErrorIs(t, err, deployer.ErrUnknownField)
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "typo-upgrade", "app").Data)
		assert.Equal(t, map[string]string{"value": "kept"}, f.configMap(ctx, t, "typo-upgrade", "second").Data)
		assert.Equal(t, []release.Status{release.StatusDeployed}, f.statuses(t, "typo-upgrade", "app"))
		f.assertCurrent(t, d, "typo-upgrade", "app", "id-1", 1)
	})

	t.Run("verdicts are shared across namespaces and clusters of one schema", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		cfg, n := f.countingConfig(dryRun)
		// A second getter stands for a second cluster of the same version.
		first, err := deployer.NewRESTClientGetter(cfg, metav1.NamespaceDefault)
		require.NoError(t, err)
		second, err := deployer.NewRESTClientGetter(cfg, metav1.NamespaceDefault)
		require.NoError(t, err)
		chrt := testChart(deploymentTemplate)

		for i, getter := range []*deployer.RESTClientGetter{first, first, second} {
			rel := testRelease([]string{"shared-a", "shared-b", "shared-c"}[i], "app", "id-1", "same")
			rel.Chart = chrt
			_, err := d.Deploy(ctx, getter, rel)
			require.NoError(t, err)
		}

		assert.Equal(t, int64(2), n.Load(), "one dry run per distinct object (ConfigMap, Deployment), not per cluster")
	})
}
