package deployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
)

// Forget deletes every record Helm keeps of the release (all revisions)
// and leaves every object the release deployed in place, unmanaged: Fleet's
// keepResources. A release that does not exist is not an error. The kept
// objects still carry Helm's ownership metadata, so a later Deploy of the
// same release is a fresh install (revision 1) that adopts them. It acts
// as the ServiceAccount the release was deployed as, if any. A release of
// another owner is not forgotten: Forget returns an *OwnedError and
// changes nothing. One that another process is changing is not either
// (ErrReleaseBusy).
func (d *Deployer) Forget(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string, owner Owner) error {
	unlock, err := d.lock(ctx, getter, namespace, name)
	if err != nil {
		return err
	}
	defer unlock()
	cfg, sa, err := d.releaseConfiguration(getter, namespace, name)
	if err != nil {
		return err
	}
	h, err := d.claim(ctx, cfg, helmGetterOf(getter, namespace, sa), namespace, name, owner)
	if err != nil {
		return fmt.Errorf("forget release %s/%s: %w", namespace, name, err)
	}
	if h == nil {
		return nil
	}
	defer h.release(ctx)
	revisions, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read history of release %s/%s: %w", namespace, name, err)
	}
	for _, rev := range revisions {
		// Helm's storage takes no context: stop between deletions.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("forget release %s/%s: %w", namespace, name, err)
		}
		_, err := cfg.Releases.Delete(name, rev.Version)
		if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) && !apierrors.IsNotFound(err) {
			return asServiceAccount(fmt.Errorf("forget release %s/%s revision %d: %w", namespace, name, rev.Version, err), namespace, sa)
		}
	}
	return nil
}

// newClientset returns a typed client for the cluster behind getter.
func newClientset(getter genericclioptions.RESTClientGetter) (kubernetes.Interface, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("read REST config: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client for %s: %w", cfg.Host, err)
	}
	return cs, nil
}
