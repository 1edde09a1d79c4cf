package deploy_test

import (
	"bytes"
	"encoding/base64"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// testKubeVersion is what .Capabilities reports when rendering: the version
// of the test API servers.
const testKubeVersion = "v1.37.1"

// The release the controller installs the agent as.
const (
	agentRelease   = "flotilla-agent"
	agentNamespace = "flotilla-system"
)

// The controller release of these tests.
const (
	controllerRelease   = "flotilla"
	controllerNamespace = "flotilla"
)

// values parses a YAML values document.
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(doc))
	require.NoError(t, err)
	return v.AsMap()
}

// render renders chrt as release name in namespace without a cluster, as
// `helm install --dry-run` would, and returns the manifest text.
func render(t *testing.T, chrt *chart.Chart, name, namespace string, vals map[string]any) (string, error) {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(testKubeVersion)
	require.NoError(t, err)
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &fake.PrintingKubeClient{Out: &bytes.Buffer{}},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          t.Logf,
	}
	in := action.NewInstall(cfg)
	in.DryRun, in.ClientOnly, in.Replace, in.IncludeCRDs = true, true, true, true
	in.ReleaseName, in.Namespace = name, namespace
	in.KubeVersion = kv
	rel, err := in.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// renderObjects renders like render, fails the test on error, and decodes
// the manifest into objects in Helm's install order.
func renderObjects(t *testing.T, chrt *chart.Chart, name, namespace string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := render(t, chrt, name, namespace, vals)
	require.NoError(t, err)
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var objs []*unstructured.Unstructured
	for _, k := range keys {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(docs[k]), &m), docs[k])
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// find returns the object of kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// kinds returns "Kind/name" of every object.
func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

// deployment converts the Deployment name of objs to its typed form.
func deployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	o := find(objs, "Deployment", name)
	require.NotNil(t, o, "no Deployment %s among %v", name, kinds(objs))
	var d appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
	return &d
}

// flagValue returns the argument after flag in args, and whether flag is
// there with a value.
func flagValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// flagValues returns the argument after every occurrence of flag in args.
func flagValues(args []string, flag string) []string {
	var out []string
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// envSecretRefs maps every environment variable taken from a Secret to
// "secret/key".
func envSecretRefs(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return out
}

// volumeMounts maps every mount path of c to its volume.
func volumeMounts(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		out[m.MountPath] = m.Name
	}
	return out
}

// volume returns the pod volume called name, or nil.
func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// assertNoSecretsOutsideSecrets fails the test if any of secrets appears in
// an object other than a Secret, in plain text or base64.
func assertNoSecretsOutsideSecrets(t *testing.T, objs []*unstructured.Unstructured, secrets []string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Secret" {
			continue
		}
		b, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		for _, s := range secrets {
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if strings.Contains(string(b), form) {
					t.Errorf("%s/%s contains the secret value %q", o.GetKind(), o.GetName(), s)
				}
			}
		}
	}
}
