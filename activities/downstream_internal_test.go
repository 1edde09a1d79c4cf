package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func testOpener(t *testing.T, ids ...string) *seal.Opener {
	t.Helper()
	var keys []keyring.Key
	for _, id := range ids {
		k, err := keyring.Generate()
		require.NoError(t, err)
		k.ID = id
		keys = append(keys, k)
	}
	r, err := keyring.New(keys...)
	require.NoError(t, err)
	o, err := seal.NewOpener(r)
	require.NoError(t, err)
	return o
}

// The digest binds cluster, namespace and content under a controller's
// key, reveals nothing of the content, and checks only what it was made
// of.
func TestDownstreamDigest(t *testing.T) {
	o := testOpener(t, "fk-1", "fk-2")
	objs := []protocol.DownstreamObject{
		{Kind: "Secret", Name: "db", Type: "Opaque", SecretData: map[string][]byte{"password": []byte("hunter2")}},
		{Kind: "ConfigMap", Name: "settings", Data: map[string]string{"mode": "fast"}},
	}
	d, err := downstreamDigest(o, "fk-2", "c1", "ns", objs)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(d, "fk-2:"), d)
	assert.NotContains(t, d, "hunter2")
	again, err := downstreamDigest(o, "fk-2", "c1", "ns", objs)
	require.NoError(t, err)
	assert.Equal(t, d, again, "deterministic: an unchanged source keeps the deployment ID")
	require.NoError(t, verifyDownstream(o, d, "c1", "ns", objs))

	changed := []protocol.DownstreamObject{objs[0], objs[1]}
	changed[0].SecretData = map[string][]byte{"password": []byte("hunter3")}
	other := testOpener(t, "fk-2") // same ID, other key material
	for name, check := range map[string]func() error{
		"content":   func() error { return verifyDownstream(o, d, "c1", "ns", changed) },
		"cluster":   func() error { return verifyDownstream(o, d, "c2", "ns", objs) },
		"namespace": func() error { return verifyDownstream(o, d, "c1", "other", objs) },
		"no digest": func() error { return verifyDownstream(o, "", "c1", "ns", objs) },
		"other key": func() error { return verifyDownstream(other, d, "c1", "ns", objs) },
		"key gone":  func() error { return verifyDownstream(testOpener(t, "fk-3"), d, "c1", "ns", objs) },
	} {
		err := check()
		require.Error(t, err, name)
		assert.Equal(t, outcome.ContentUnavailable, downstreamClass(err), name)
		assert.NotContains(t, err.Error(), "hunter", name)
	}
}

// withDownstream leaves options without downstreamResources alone (their
// deployment IDs stay Fleet's) and fails a bundle whose controller cannot
// read Secrets by name.
func TestWithDownstream_NoSourcesNoChange(t *testing.T) {
	opts := bundle.Options{DefaultNamespace: "app"}
	dep := render.Deployment{Deploy: true, Options: opts, DeploymentID: fleetyaml.DeploymentID("s-m", opts)}
	before := dep
	require.NoError(t, withDownstream(context.Background(), nil, nil, &dep, "s-m", "c1", "ns"))
	assert.Equal(t, before, dep)

	dep.Options.DownstreamResources = []bundle.DownstreamResource{{Kind: "secret", Name: "db"}}
	err := withDownstream(context.Background(), nil, nil, &dep, "s-m", "c1", "ns")
	assert.Equal(t, outcome.Invalid, downstreamClass(err))
	assert.Equal(t, []protocol.DownstreamRef{{Kind: "Secret", Name: "db"}}, downstreamRefs(dep.Options.DownstreamResources),
		"kinds are matched in any case, as customizations merge them")
}

// copier on a real API server: copies are created with their labels in a
// namespace created for them, shared by releases, updated, replaced when
// a Secret's type changes, never overwrite an object Flotilla did not
// copy, and are released per release.
func TestCopier(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	cs := kube.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "copies"
	secret := protocol.DownstreamObject{Kind: "Secret", Name: "db", SecretData: map[string][]byte{"password": []byte("v1")}}
	settings := protocol.DownstreamObject{Kind: "ConfigMap", Name: "settings", Data: map[string]string{"mode": "fast"},
		BinaryData: map[string][]byte{"blob": {0, 1}}}
	a := copier{cs: cs, namespace: ns, release: "rel-a", bundle: "repo-a", source: "fleet-default"}
	b := copier{cs: cs, namespace: ns, release: "rel-b", bundle: "repo-b", source: "fleet-default"}

	require.NoError(t, a.apply(ctx, []protocol.DownstreamObject{secret, settings}), "the namespace is created")
	s := getSecret(ctx, t, cs, ns, "db")
	require.NotNil(t, s)
	assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
	assert.Equal(t, "v1", string(s.Data["password"]))
	assert.Equal(t, map[string]string{LabelDownstreamCopy: "true", labelManagedBy: "flotilla", downstreamOwnerPrefix + "rel-a": "repo-a"}, s.Labels)
	assert.Equal(t, "Secret fleet-default/db", s.Annotations[AnnotationDownstreamSource])
	m, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, settings.Data, m.Data)
	assert.Equal(t, settings.BinaryData, m.BinaryData)

	// Another release copies the same Secret, now changed and of another
	// type: replaced, and owned by both.
	tls := secret
	tls.Type, tls.SecretData = "kubernetes.io/tls", map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}
	require.NoError(t, b.apply(ctx, []protocol.DownstreamObject{tls}))
	s = getSecret(ctx, t, cs, ns, "db")
	assert.Equal(t, corev1.SecretTypeTLS, s.Type)
	assert.Equal(t, tls.SecretData, s.Data)
	assert.Equal(t, "repo-b", s.Labels[downstreamOwnerPrefix+"rel-b"])
	require.NoError(t, a.apply(ctx, []protocol.DownstreamObject{tls, settings}))
	s = getSecret(ctx, t, cs, ns, "db")
	assert.Contains(t, s.Labels, downstreamOwnerPrefix+"rel-a")
	assert.Contains(t, s.Labels, downstreamOwnerPrefix+"rel-b")

	// An object of the same name Flotilla did not make is left alone.
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Data: map[string]string{"k": "mine"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = a.apply(ctx, []protocol.DownstreamObject{{Kind: "ConfigMap", Name: "mine", Data: map[string]string{"k": "copy"}}})
	var de *DownstreamError
	require.True(t, errors.As(err, &de), "%v", err)
	assert.Equal(t, outcome.Invalid, de.Class)
	assert.Contains(t, err.Error(), "ConfigMap copies/mine exists on the cluster and is not a copy")
	m, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "mine", m.Data["k"])

	// Release a drops everything: the shared Secret stays for b, without
	// a's label; the ConfigMap only a used goes.
	require.NoError(t, a.prune(ctx, nil))
	s = getSecret(ctx, t, cs, ns, "db")
	require.NotNil(t, s, "b still uses it")
	assert.NotContains(t, s.Labels, downstreamOwnerPrefix+"rel-a")
	_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	require.NoError(t, b.prune(ctx, map[string]bool{"Secret/db": true}), "kept")
	require.NotNil(t, getSecret(ctx, t, cs, ns, "db"))
	require.NoError(t, b.prune(ctx, nil))
	assert.Nil(t, getSecret(ctx, t, cs, ns, "db"), "the last release took it")
	_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{})
	require.NoError(t, err, "never touched")
}

func getSecret(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return s
}
