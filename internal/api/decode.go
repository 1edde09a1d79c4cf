package api

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one decoded YAML document; exactly one pointer is set.
type Document struct {
	// Source names where the document came from ("apps.yaml#2").
	Source       string
	GitRepo      *GitRepo
	Cluster      *Cluster
	ClusterGroup *ClusterGroup
	Secret       *Secret
	HelmOp       *HelmOp
	ConfigMap    *ConfigMap
	// GitRepoRestriction and Policy restrict the GitRepos and HelmOps of
	// their namespace (internal/policy).
	GitRepoRestriction *GitRepoRestriction
	Policy             *Policy
	// Notification delivers its namespace's events (notify.Spec).
	Notification *Notification
	// Warnings name the document's fields Flotilla does not know (see
	// UnknownFields): it ignores them, and `flotilla apply` says so.
	Warnings []string
}

// Kind returns the document's kind.
func (d Document) Kind() string {
	switch {
	case d.GitRepo != nil:
		return KindGitRepo
	case d.Cluster != nil:
		return KindCluster
	case d.ClusterGroup != nil:
		return KindClusterGroup
	case d.Secret != nil:
		return KindSecret
	case d.HelmOp != nil:
		return KindHelmOp
	case d.ConfigMap != nil:
		return KindConfigMap
	case d.GitRepoRestriction != nil:
		return KindGitRepoRestriction
	case d.Policy != nil:
		return KindPolicy
	case d.Notification != nil:
		return KindNotification
	}
	return ""
}

// Name returns "<namespace>/<name>" or "<name>" for cluster-scoped kinds.
func (d Document) Name() string {
	switch {
	case d.GitRepo != nil:
		return d.GitRepo.Metadata.Namespace + "/" + d.GitRepo.Metadata.Name
	case d.Cluster != nil:
		return d.Cluster.Metadata.Name
	case d.ClusterGroup != nil:
		return d.ClusterGroup.Metadata.Name
	case d.Secret != nil:
		return d.Secret.Metadata.Namespace + "/" + d.Secret.Metadata.Name
	case d.HelmOp != nil:
		return d.HelmOp.Metadata.Namespace + "/" + d.HelmOp.Metadata.Name
	case d.ConfigMap != nil:
		return d.ConfigMap.Metadata.Namespace + "/" + d.ConfigMap.Metadata.Name
	case d.GitRepoRestriction != nil:
		return d.GitRepoRestriction.Metadata.Namespace + "/" + d.GitRepoRestriction.Metadata.Name
	case d.Policy != nil:
		return d.Policy.Metadata.Namespace + "/" + d.Policy.Metadata.Name
	case d.Notification != nil:
		return d.Notification.Metadata.Namespace + "/" + d.Notification.Metadata.Name
	}
	return ""
}

// Decode reads every YAML (or JSON) document in r, defaults and validates
// it. source names the input in errors. Empty documents are skipped; a
// document of an unknown kind or apiVersion, or an invalid one, is an error
// naming the source and the field.
func Decode(r io.Reader, source string) ([]Document, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var docs []Document
	for i := 1; ; i++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(raw) == 0 {
			continue
		}
		src := fmt.Sprintf("%s#%d", source, i)
		doc, err := decodeOne(raw, src)
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

// documentKind is a kind Decode reads: the apiVersions it is accepted
// in, and the Document field it decodes into (field sets it to a new
// value and returns it).
type documentKind struct {
	versions []string
	field    func(*Document) any
}

var (
	flotillaOrFleet = []string{Version, FleetVersion}
	core            = []string{"v1"}
	documentKinds   = map[string]documentKind{
		KindGitRepo:            {flotillaOrFleet, func(d *Document) any { d.GitRepo = &GitRepo{}; return d.GitRepo }},
		KindHelmOp:             {flotillaOrFleet, func(d *Document) any { d.HelmOp = &HelmOp{}; return d.HelmOp }},
		KindCluster:            {flotillaOrFleet, func(d *Document) any { d.Cluster = &Cluster{}; return d.Cluster }},
		KindClusterGroup:       {flotillaOrFleet, func(d *Document) any { d.ClusterGroup = &ClusterGroup{}; return d.ClusterGroup }},
		KindGitRepoRestriction: {flotillaOrFleet, func(d *Document) any { d.GitRepoRestriction = &GitRepoRestriction{}; return d.GitRepoRestriction }},
		KindPolicy:             {flotillaOrFleet, func(d *Document) any { d.Policy = &Policy{}; return d.Policy }},
		KindNotification:       {[]string{Version}, func(d *Document) any { d.Notification = &Notification{}; return d.Notification }},
		KindSecret:             {core, func(d *Document) any { d.Secret = &Secret{}; return d.Secret }},
		KindConfigMap:          {core, func(d *Document) any { d.ConfigMap = &ConfigMap{}; return d.ConfigMap }},
	}
)

func decodeOne(raw map[string]any, src string) (Document, error) {
	apiVersion, _ := raw["apiVersion"].(string)
	kind, _ := raw["kind"].(string)
	data, err := yaml.Marshal(raw)
	if err != nil {
		return Document{}, fmt.Errorf("%s: %w", src, err)
	}
	doc := Document{Source: src}
	k, ok := documentKinds[kind]
	if !ok || !slices.Contains(k.versions, apiVersion) {
		return Document{}, fmt.Errorf("%s: unsupported kind %q with apiVersion %q (want GitRepo, HelmOp, Cluster, ClusterGroup, GitRepoRestriction or Policy in %s or %s, Notification in %s, or a v1 Secret or ConfigMap)",
			src, kind, apiVersion, Version, FleetVersion, Version)
	}
	err = unmarshal(data, k.field(&doc))
	if err != nil {
		return Document{}, fmt.Errorf("%s: %s %s: %w", src, kind, metaName(raw), err)
	}
	if err := doc.defaultAndValidate(); err != nil {
		return Document{}, fmt.Errorf("%s: %w", src, err)
	}
	for _, f := range UnknownFields(raw, reflect.TypeOf(doc.object()).Elem()) {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("%s: %s %s: unknown field %q (ignored)", src, kind, doc.Name(), f))
	}
	if doc.GitRepo != nil {
		for _, w := range doc.GitRepo.Spec.Overridden() {
			doc.Warnings = append(doc.Warnings, fmt.Sprintf("%s: %s %s: %s", src, kind, doc.Name(), w))
		}
	}
	return doc, nil
}

// object is the document's decoded value.
func (d *Document) object() any {
	switch {
	case d.GitRepo != nil:
		return d.GitRepo
	case d.Cluster != nil:
		return d.Cluster
	case d.ClusterGroup != nil:
		return d.ClusterGroup
	case d.HelmOp != nil:
		return d.HelmOp
	case d.ConfigMap != nil:
		return d.ConfigMap
	case d.GitRepoRestriction != nil:
		return d.GitRepoRestriction
	case d.Policy != nil:
		return d.Policy
	case d.Notification != nil:
		return d.Notification
	}
	return d.Secret
}

func (d *Document) defaultAndValidate() error {
	switch {
	case d.GitRepo != nil:
		d.GitRepo.Default()
		return d.GitRepo.Validate()
	case d.Cluster != nil:
		return d.Cluster.Validate()
	case d.ClusterGroup != nil:
		return d.ClusterGroup.Validate()
	case d.HelmOp != nil:
		d.HelmOp.Default()
		return d.HelmOp.Validate()
	case d.Secret != nil:
		if d.Secret.Metadata.Namespace == "" {
			d.Secret.Metadata.Namespace = DefaultNamespace
		}
		return d.Secret.Validate()
	case d.ConfigMap != nil:
		if d.ConfigMap.Metadata.Namespace == "" {
			d.ConfigMap.Metadata.Namespace = DefaultNamespace
		}
		return d.ConfigMap.Validate()
	case d.GitRepoRestriction != nil:
		d.GitRepoRestriction.Default()
		return d.GitRepoRestriction.Validate()
	case d.Policy != nil:
		d.Policy.Default()
		return d.Policy.Validate()
	case d.Notification != nil:
		d.Notification.Default()
		return d.Notification.Validate()
	}
	return nil
}

// unmarshal decodes leniently, as Fleet does: fields Flotilla does not
// know are ignored (Decode reports them as warnings).
func unmarshal(data []byte, v any) error {
	return yaml.Unmarshal(data, v)
}

func metaName(raw map[string]any) string {
	md, _ := raw["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
}
