package api

// Overridden returns a warning for each field s sets that another of its
// fields makes unused, as in Fleet: paths when bundles lists the bundles
// (fleet apply --driven-scan gets no paths), and helmSecretName when
// helmSecretNameForPaths is set (gitjob mounts only the latter). Decode
// adds them to the document's warnings.
func (s GitRepoSpec) Overridden() []string {
	var out []string
	if len(s.Paths) > 0 && len(s.Bundles) > 0 {
		out = append(out, "spec.paths: not used: spec.bundles lists the bundles (as in Fleet)")
	}
	if s.HelmSecretName != "" && s.HelmSecretNameForPaths != "" {
		out = append(out, "spec.helmSecretName: not used: spec.helmSecretNameForPaths gives each bundle path its credentials (as in Fleet)")
	}
	return out
}
