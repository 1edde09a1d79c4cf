package deployer

import (
	"context"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultKubeVersion is the Kubernetes version Template renders for when
// none is given: the one Fleet's offline renderer (`fleet test`) assumes.
const DefaultKubeVersion = "v1.25.0"

// Template renders rel without a cluster, exactly as Deploy would install
// it (same chart, values, pre-renderer and post-rendering: forced
// namespace, labels, annotations and their validation), and returns the
// objects as one YAML stream: the chart's CRDs first, then the templates'
// output, then hooks. kubeVersion ("v1.30.0") is what .Capabilities
// reports; empty means DefaultKubeVersion. Scopes of kinds are those
// built into Kubernetes; custom resources count as namespaced.
func (d *Deployer) Template(ctx context.Context, rel Release, kubeVersion string) ([]byte, error) {
	if err := validate(rel); err != nil {
		return nil, err
	}
	if kubeVersion == "" {
		kubeVersion = DefaultKubeVersion
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("kube version %q: %w", kubeVersion, err)
	}
	pr := &postRenderer{rel: rel, mapper: meta.NewDefaultRESTMapper(nil), scopes: map[schema.GroupKind]bool{}}
	if err := pr.checkCRDFiles(rel.Chart); err != nil {
		return nil, fmt.Errorf("check CRDs of release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	out, err := d.clientRender(ctx, rel, pr, kv, nil, false)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(out.Manifest)
	for _, h := range out.Hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return []byte(b.String()), nil
}
