package crds

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager of Install.
const FieldManager = "flotilla"

// establishTimeout bounds the wait for one CRD to be Established when the
// caller's context has no earlier deadline.
const establishTimeout = time.Minute

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Install creates or updates (server-side apply, field manager "flotilla")
// every CRD of All on the cluster of cfg and waits until each is
// Established. A CRD of the same name that exists without the label
// app.kubernetes.io/managed-by=flotilla (Fleet's own, installed by Fleet's
// chart) is left as it is: Flotilla uses Fleet's CRDs where they are
// installed. Install is idempotent.
func Install(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	client := dyn.Resource(crdGVR)
	for _, doc := range All() {
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &crd.Object); err != nil {
			return fmt.Errorf("install CRDs: embedded CRD: %w", err)
		}
		if err := installOne(ctx, client, crd); err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, k := range Kinds {
		if err := waitEstablished(ctx, client, k.CRDName()); err != nil {
			return fmt.Errorf("install CRD %s: %w", k.CRDName(), err)
		}
	}
	return nil
}

// installOne applies crd unless a CRD of its name exists that Flotilla did
// not create.
func installOne(ctx context.Context, client dynamic.ResourceInterface, crd *unstructured.Unstructured) error {
	existing, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case !Managed(existing.GetLabels()):
		return nil // Fleet's own: used as it is
	}
	_, err = client.Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

// Managed reports whether labels mark a CRD Flotilla created.
func Managed(labels map[string]string) bool {
	return labels[ManagedByLabel] == ManagedByValue
}

// waitEstablished polls the CRD until its Established condition is True;
// a NamesAccepted condition that is False ends the wait with its message.
func waitEstablished(ctx context.Context, client dynamic.ResourceInterface, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			switch {
			case m["type"] == "Established" && m["status"] == "True":
				established = true
			case m["type"] == "NamesAccepted" && m["status"] == "False":
				return false, fmt.Errorf("names not accepted: %v", m["message"])
			}
			last = fmt.Sprintf("%v=%v: %v", m["type"], m["status"], m["message"])
		}
		return established, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("not Established (last condition %s): %w", last, err)
	}
	return err
}
