package deployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
)

// ErrUnknownField marks a rendered object the API server refuses to
// decode strictly: a field its schema does not know (a typo such as
// "dataa" or "imagee"), or a value of the wrong type. Errors wrapping it
// also wrap ErrInvalidRelease, and nothing was applied to the cluster.
var ErrUnknownField = errors.New("unknown field")

// fieldChecker asks a cluster's API server whether rendered objects hold
// fields its schema does not know, before Helm applies anything: one
// server-side dry-run create per object with field validation Strict,
// which the server answers by decoding the object against the schema it
// serves (CRDs included) and, for a valid object, going on to admission
// and storage checks that are irrelevant here (a missing namespace or an
// existing object still proves the fields known).
//
// This replaces Helm's client-side OpenAPI validation, which on every
// server with server-side field validation (Kubernetes 1.27+) validates
// nothing: it downloads and parses each group version's OpenAPI document
// (megabytes, once per Build) only to learn that the server could
// validate, then sends no fieldValidation parameter, so the server drops
// unknown fields with a warning. Helm's validation is therefore turned
// off, and the objects are checked here instead.
//
// Verdicts are shared: an object the server accepted is remembered by
// its group version's schema hash (from the server's OpenAPI v3 index,
// so every API server serving the same schema shares them) and its
// content without namespace, labels and annotations, which cannot hold
// unknown fields. A thousand clusters of one version receiving one bundle
// cost one dry run per object, not a thousand.
type fieldChecker struct {
	ctx    context.Context
	getter genericclioptions.RESTClientGetter
	mapper meta.RESTMapper
	cache  *fieldVerdicts
	// namespace is the release's, where objects without one go.
	namespace string
	client    dynamic.Interface
	// paths are the server's OpenAPI v3 group versions by path
	// ("api/v1", "apis/apps/v1") with their schema URL, hash included;
	// nil until read, empty when the server has none.
	paths map[string]string
}

// check checks every object of docs; it returns the problems found,
// each naming the object and its template, joined and wrapping
// ErrUnknownField and ErrInvalidRelease, or an error reaching the server.
func (c *fieldChecker) check(docs []*document) error {
	var invalid []error
	for _, doc := range docs {
		for _, obj := range doc.objects() {
			err := c.checkObject(obj)
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrUnknownField) {
				return err
			}
			invalid = append(invalid, fmt.Errorf("%s %s%s: %w", obj.GetKind(), objectName(obj), doc.source(), err))
		}
	}
	if len(invalid) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidRelease, errors.Join(invalid...))
	}
	return nil
}

// checkObject dry-runs the creation of obj unless an object of the same
// schema and content passed before.
func (c *fieldChecker) checkObject(obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil // Helm reports it
	}
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// A kind the server does not serve yet (a custom resource whose
		// CRD this release installs): Helm maps it once the CRD exists.
		return nil
	}
	key := c.key(gvk, obj)
	if key != "" && c.cache.passed(key) {
		return nil
	}
	if c.client == nil {
		cfg, err := c.getter.ToRESTConfig()
		if err != nil {
			return err
		}
		if c.client, err = dynamic.NewForConfig(cfg); err != nil {
			return fmt.Errorf("create client for %s: %w", cfg.Host, err)
		}
	}
	ri := c.client.Resource(mapping.Resource)
	var rc dynamic.ResourceInterface = ri
	probe := obj.DeepCopy()
	probe.SetResourceVersion("")
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if probe.GetNamespace() == "" {
			probe.SetNamespace(c.namespace) // where Helm puts it
		}
		rc = ri.Namespace(probe.GetNamespace())
	}
	_, err = rc.Create(c.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict, FieldManager: FieldManager})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), apierrors.IsInvalid(err),
		missingNamespace(err):
		// Decoded strictly: every field is known. (Invalid values are
		// for the real apply to report, with the server's reasons.)
		if key != "" {
			c.cache.pass(key)
		}
		return nil
	case apierrors.IsBadRequest(err):
		return fmt.Errorf("%w: %s", ErrUnknownField, err.Error()) // a StatusError's text is the server's message
	case apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err), apierrors.IsUnauthorized(err),
		apierrors.IsNotFound(err):
		// No verdict: the request was refused before decoding. The real
		// apply reports what it must.
		return nil
	default:
		return fmt.Errorf("check fields of %s %s: %w", gvk.Kind, objectName(obj), err)
	}
}

// missingNamespace reports a NotFound naming a namespace: admission
// refused the object (its namespace is created later, by the post-renderer), after
// decoding it. Any other NotFound proves nothing.
func missingNamespace(err error) bool {
	var se apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &se) {
		return false
	}
	d := se.Status().Details
	return d != nil && d.Kind == "namespaces"
}

// key identifies obj's schema and field content, or "" when the server
// publishes no schema hash for its group version (nothing is cached).
func (c *fieldChecker) key(gvk schema.GroupVersionKind, obj *unstructured.Unstructured) string {
	if c.paths == nil {
		c.paths = map[string]string{}
		dc, err := c.getter.ToDiscoveryClient()
		if err != nil {
			return ""
		}
		paths, err := dc.OpenAPIV3().Paths()
		if err != nil {
			return ""
		}
		for p, gv := range paths {
			c.paths[p] = gv.ServerRelativeURL()
		}
	}
	path := "apis/" + gvk.Group + "/" + gvk.Version
	if gvk.Group == "" {
		path = "api/" + gvk.Version
	}
	url := c.paths[path]
	if !strings.Contains(url, "hash=") {
		return ""
	}
	fields := obj.DeepCopy()
	for _, f := range []string{"namespace", "labels", "annotations"} {
		unstructured.RemoveNestedField(fields.Object, "metadata", f)
	}
	data, err := json.Marshal(fields.Object) // map keys sorted
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(url))
	h.Write([]byte{0})
	h.Write([]byte(gvk.Kind))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// maxFieldVerdicts bounds the objects a Deployer remembers as checked
// (32 bytes each plus map overhead, about 1 MiB at the limit).
const maxFieldVerdicts = 8192

// fieldVerdicts remembers the keys of objects that passed, the oldest
// forgotten first beyond maxFieldVerdicts. Safe for concurrent use.
type fieldVerdicts struct {
	mu    sync.Mutex
	ok    map[string]struct{}
	order []string
}

func newFieldVerdicts() *fieldVerdicts { return &fieldVerdicts{ok: map[string]struct{}{}} }

func (v *fieldVerdicts) passed(key string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.ok[key]
	return ok
}

func (v *fieldVerdicts) pass(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.ok[key]; ok {
		return
	}
	if len(v.order) >= maxFieldVerdicts {
		delete(v.ok, v.order[0])
		v.order = v.order[1:]
	}
	v.ok[key] = struct{}{}
	v.order = append(v.order, key)
}
