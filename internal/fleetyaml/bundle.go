package fleetyaml

// Bundle is one deployable unit of a repository: a directory, its options
// and the ID of its content. It is a plain value that survives a JSON round
// trip unchanged.
type Bundle struct {
	// Name is fleet.yaml's name, or ReleaseName("<repo>/<dir>") (just the
	// repository name for the root directory), as Fleet names bundles.
	Name string `json:"name"`
	// Dir is the bundle directory, slash-separated and relative to the
	// repository root ("." for the root).
	Dir string `json:"dir"`
	// ManifestID is the ID of the bundle's Manifest.
	ManifestID string `json:"manifestID"`
	// Options are the deployment options from fleet.yaml, before any
	// per-cluster customization. Chart reads the options of the cluster
	// being rendered for from here.
	Options Options `json:"options"`
	// Spec holds fleet.yaml's targeting, rollout and dependency settings.
	Spec Spec `json:"spec"`
	// Labels are fleet.yaml's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are fleet.yaml's annotations. Like labels, they are not
	// deployment options: they change neither the options hash nor the
	// deployment ID.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Type is "helm", "kustomize", "helm+kustomize" or "yaml": how the
	// bundle deploys (before customizations).
	Type string `json:"type,omitempty"`
	// ResourceCount is the number of files in the Manifest.
	ResourceCount int `json:"resourceCount"`
	// Warnings describe content Read ignored, as Fleet ignores it, each
	// naming the file: keys of fleet.yaml that Fleet does not define
	// (`app/fleet.yaml: unknown field "helm.chrat" (ignored)`) and raw
	// YAML files skipped because a document is not a Kubernetes object
	// (see Chart). They are in a stable order: the same content gives the
	// same warnings.
	Warnings []string `json:"warnings,omitempty"`
}

// ReleaseName returns the Helm release name of the bundle: helm.releaseName
// when set, otherwise ReleaseName(b.Name), as Fleet's agent does.
func (b Bundle) ReleaseName() string {
	if b.Options.Helm != nil && b.Options.Helm.ReleaseName != "" {
		return b.Options.Helm.ReleaseName
	}
	return ReleaseName(b.Name)
}
