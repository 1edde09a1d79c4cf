package main

import (
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/internal/content"
)

// registryFlags configure the OCI registry that carries rendered bundles
// from the controller to agents.
type registryFlags struct {
	URL       string
	PlainHTTP bool
	CAFile    string
	Username  string
	Password  string
}

func (r *registryFlags) bindFlags(fs *pflag.FlagSet, role string) {
	fs.StringVar(&r.URL, "content-registry", "", "OCI repository for rendered bundles, oci://HOST[:PORT]/REPO: the controller pushes, agents pull ("+role+")")
	fs.BoolVar(&r.PlainHTTP, "content-registry-plain-http", false, "talk to the content registry over plain HTTP (local registries only)")
	fs.StringVar(&r.CAFile, "content-registry-ca", "", "PEM file of CAs trusted for the content registry")
	fs.StringVar(&r.Username, "content-registry-username", "", "content registry username")
	fs.StringVar(&r.Password, "content-registry-password", "", "content registry password (prefer $FLOTILLA_CONTENT_REGISTRY_PASSWORD)")
}

// open returns the registry, or nil when none is configured.
func (r registryFlags) open() (*content.Registry, error) {
	if r.URL == "" {
		return nil, nil
	}
	return content.NewRegistry(content.RegistryOptions{URL: r.URL, PlainHTTP: r.PlainHTTP, CAFile: r.CAFile,
		Username: r.Username, Password: r.Password})
}

// openContent opens the content store under the state directory dir,
// backed by the registry when one is configured.
func (r registryFlags) openContent(dir string) (*content.Store, error) {
	reg, err := r.open()
	if err != nil {
		return nil, err
	}
	cs, err := content.New(filepath.Join(dir, "content"))
	if err != nil {
		return nil, err
	}
	if reg != nil {
		cs = cs.WithRemote(reg)
	}
	return cs, nil
}
