// Package bundle turns a checked-out Git repository into Fleet-compatible
// bundles: it finds bundle directories (Scan), reads one directory with its
// fleet.yaml into a Bundle and a Manifest of its files (Read), computes the
// IDs Fleet uses to decide whether to redeploy (Manifest.ID, Options.Hash,
// DeploymentID) and builds the Helm chart a bundle deploys as (Chart).
//
// Everything here is pure file and data work: no network, no cluster, no
// Temporal. Bundle, Manifest and Options are plain JSON-friendly values so
// they can travel through workflow history.
//
// Compatibility with Rancher Fleet is the goal wherever Fleet's behaviour is
// observable: bundle names, which directories are bundles, which files belong
// to a bundle, and the manifest and deployment IDs. Where this package
// deliberately differs, the comment at the relevant code says so.
package bundle
