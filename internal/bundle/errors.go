package bundle

import (
	"errors"
	"strings"
)

var (
	// ErrUnsupported marks bundle content that Fleet accepts but this package
	// does not handle yet, such as remote Helm charts or kustomize.
	ErrUnsupported = errors.New("not supported yet")
	// ErrOutsideRepo marks a path that leaves the repository, either through
	// ".." or through a symbolic link.
	ErrOutsideRepo = errors.New("path leaves the repository")
	// ErrNoMatch marks a scan path glob that matches no directory.
	ErrNoMatch = errors.New("matches no directory")
	// ErrNoBundles is returned by Scan when the paths hold no bundle at all.
	ErrNoBundles = errors.New("no bundles found")
)

// ValidationError reports repository content that cannot be used as
// written: a malformed fleet.yaml or .fleetignore, a missing referenced
// file, a path that leaves the repository. Retrying does not help; the
// repository has to change. Err is one of this package's sentinels where
// one applies, so errors.Is works through a ValidationError.
type ValidationError struct {
	// Bundle is the bundle name, or empty when no bundle is known yet.
	Bundle string
	// Path is the slash-separated path, relative to the repository root, of
	// the file (or scan glob) at fault.
	Path string
	// Field is the fleet.yaml key at fault, such as "helm.releaseName", or
	// empty when the problem is the file as a whole.
	Field string
	// Err describes the problem.
	Err error
}

// Error formats the error as "bundle <name>: <path>: <field>: <err>",
// leaving out the parts that are empty.
func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.Bundle != "" {
		b.WriteString("bundle " + e.Bundle + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return strings.TrimSuffix(b.String(), ": ")
}

// Unwrap returns the underlying error.
func (e *ValidationError) Unwrap() error { return e.Err }
