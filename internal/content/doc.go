// Package content is a content-addressed store on local disk for bundle
// manifests and deployment options. Entries are named by their own ID
// (bundle.Manifest.ID, bundle.Options.Hash), so they never change once
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
package content
