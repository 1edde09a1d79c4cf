// Package content is a content-addressed store on local disk for bundle
// manifests and deployment options. Entries are named by their own ID
// (bundle.Manifest.ID, bundle.Options.Key), so they never change once
// written: writing is idempotent and reads verify what they return.
//
// Layout under the store directory:
//
//	manifests/<manifest ID>.json.gz   gzip-compressed JSON of a bundle.Manifest
//	options/<options hash>.json       JSON of a bundle.Options
//
// Files are written to a temporary file and renamed into place, so readers
// never see partial files and several goroutines or processes can share a
// store without locks.
//
// Processes that do not share a disk (the controller and pull-mode agents
// in other clusters) exchange manifests and options through an OCI
// registry: Store.WithRemote adds a Registry that every put also pushes
// to, and that gets read from on a local miss. Each item is an OCI
// artifact in one repository, tagged "manifest-<hex>" or "options-<hex>",
// whose single layer holds the bytes of the file above. A registry is not
// trusted: pulled items are verified against their ID exactly as local
// files are, and cached locally only when they match.
package content
