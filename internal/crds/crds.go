// Package crds holds the CustomResourceDefinitions of Fleet's API
// (fleet.cattle.io/v1alpha1) that Flotilla serves in its Kubernetes-native
// mode, and installs them.
//
// The definitions are the files of the flotilla chart's crds/ directory
// (deploy/charts/flotilla/crds), generated from internal/api's types by
// hack/crdgen (`make crds`); this package reads them from the chart the
// binary embeds, so there is one copy. Install applies them to a cluster
// and leaves a CRD of the same name it did not create (Fleet's own) as it
// is.
package crds

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/deploy"
)

// The API group and version of every kind.
const (
	Group   = "fleet.cattle.io"
	Version = "v1alpha1"
)

// ManagedByLabel and ManagedByValue mark the CRDs Flotilla created: Install
// updates only CRDs that carry the label with this value.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "flotilla"
)

// Kind is one kind of the API: its resource (the plural) and scope.
type Kind struct {
	// Kind is the object kind, e.g. "GitRepo".
	Kind string
	// Resource is the plural resource name, e.g. "gitrepos".
	Resource string
	// Namespaced is true for namespaced kinds (all of Fleet's are).
	Namespaced bool
}

// GroupVersionResource is the kind's resource for dynamic clients.
func (k Kind) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: k.Resource}
}

// GroupVersionKind is the kind's full name.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: Version, Kind: k.Kind}
}

// CRDName is the name of the kind's CustomResourceDefinition, e.g.
// "gitrepos.fleet.cattle.io".
func (k Kind) CRDName() string { return k.Resource + "." + Group }

// Kinds lists every kind with a CRD, in the order of the generated files.
// Callers must not modify it.
var Kinds = []Kind{
	{Kind: "Bundle", Resource: "bundles", Namespaced: true},
	{Kind: "Cluster", Resource: "clusters", Namespaced: true},
	{Kind: "ClusterGroup", Resource: "clustergroups", Namespaced: true},
	{Kind: "ClusterRegistrationToken", Resource: "clusterregistrationtokens", Namespaced: true},
	{Kind: "GitRepo", Resource: "gitrepos", Namespaced: true},
	{Kind: "GitRepoRestriction", Resource: "gitreporestrictions", Namespaced: true},
	{Kind: "HelmOp", Resource: "helmops", Namespaced: true},
	{Kind: "Policy", Resource: "policies", Namespaced: true},
}

// FileName is the name of the kind's file in the chart's crds/ directory.
func (k Kind) FileName() string { return k.CRDName() + ".yaml" }

// ChartDir is the chart's CRD directory, relative to the repository root.
const ChartDir = "deploy/charts/flotilla/crds"

// files holds the embedded chart's crds/ files by base name.
var files = sync.OnceValues(func() (map[string][]byte, error) {
	c, err := deploy.ControllerChart()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range c.CRDObjects() {
		out[f.File.Name[strings.LastIndex(f.File.Name, "/")+1:]] = f.File.Data
	}
	return out, nil
})

// All returns the YAML of every CRD, one document each, in the order of
// Kinds. It panics if the embedded chart lacks one: that is a build
// defect (run `make crds`), caught by this package's tests.
func All() [][]byte {
	m, err := files()
	if err != nil {
		panic(fmt.Sprintf("crds: the embedded flotilla chart: %v", err))
	}
	out := make([][]byte, 0, len(Kinds))
	for _, k := range Kinds {
		b, ok := m[k.FileName()]
		if !ok {
			panic(fmt.Sprintf("crds: the embedded flotilla chart has no crds/%s (run `make crds`)", k.FileName()))
		}
		out = append(out, b)
	}
	return out
}

// fileNames lists the embedded chart's crds/ files, sorted (for tests).
func fileNames() ([]string, error) {
	m, err := files()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
