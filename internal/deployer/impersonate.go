package deployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// ServiceAccountAnnotation is the chart annotation, stored with a release
// revision, naming the ServiceAccount (of the release's namespace) the
// revision was deployed as (Release.ServiceAccount). Later operations on
// the release (status reads, rollbacks, drift corrections, uninstall) act
// as the account its newest record names.
const ServiceAccountAnnotation = "flotilla.dev/service-account"

// ErrServiceAccountNotFound marks a Deploy whose Release.ServiceAccount
// does not exist in the release's namespace: nothing was applied.
var ErrServiceAccountNotFound = errors.New("not found")

// ServiceAccountUser is the user name Kubernetes gives ServiceAccount
// name of namespace: system:serviceaccount:<namespace>:<name>.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// Impersonating returns a getter for the cluster behind g whose requests
// act as user (Kubernetes impersonation; g's credentials must be allowed
// to impersonate). Discovery and REST mapping are g's: they describe the
// API, which is the same for every user, and g's caches are shared.
func Impersonating(g genericclioptions.RESTClientGetter, user string) genericclioptions.RESTClientGetter {
	return &impersonatingGetter{RESTClientGetter: g, user: user}
}

// impersonatingGetter is g acting as user.
type impersonatingGetter struct {
	genericclioptions.RESTClientGetter
	user string
}

// ToRESTConfig returns a copy of the wrapped getter's config that
// impersonates the user (and no groups: the API server adds a
// ServiceAccount's own).
func (g *impersonatingGetter) ToRESTConfig() (*rest.Config, error) {
	cfg, err := g.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: g.user}
	return cfg, nil
}

// ServiceAccountOf returns the ServiceAccount a release revision was
// deployed as, "" when none (the worker's own credentials).
func ServiceAccountOf(rel *release.Release) string {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return ""
	}
	return rel.Chart.Metadata.Annotations[ServiceAccountAnnotation]
}

// checkServiceAccount makes sure ServiceAccount name exists in namespace,
// reading it with getter's own credentials.
func checkServiceAccount(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string) error {
	cs, err := newClientset(getter)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("service account %s/%s: %w", namespace, name, ErrServiceAccountNotFound)
	case err != nil:
		return fmt.Errorf("service account %s/%s: %w", namespace, name, err)
	}
	return nil
}

// actor returns the getter Helm uses for rel: getter acting as
// rel.ServiceAccount, which must exist, or getter itself.
func actor(ctx context.Context, getter genericclioptions.RESTClientGetter, rel Release) (genericclioptions.RESTClientGetter, error) {
	if rel.ServiceAccount == "" {
		return getter, nil
	}
	if err := checkServiceAccount(ctx, getter, rel.Namespace, rel.ServiceAccount); err != nil {
		return nil, err
	}
	return Impersonating(getter, ServiceAccountUser(rel.Namespace, rel.ServiceAccount)), nil
}

// actingAs returns getter acting as the ServiceAccount rel was deployed
// as, or getter itself when rel names none.
func actingAs(getter genericclioptions.RESTClientGetter, rel *release.Release) genericclioptions.RESTClientGetter {
	if sa := ServiceAccountOf(rel); sa != "" {
		return Impersonating(getter, ServiceAccountUser(rel.Namespace, sa))
	}
	return getter
}

// releaseConfiguration returns the Helm configuration for an operation on
// the existing release namespace/name: acting as the ServiceAccount its
// newest record names (see ServiceAccountAnnotation), with getter's own
// credentials otherwise, and that account ("" for none). The record is
// read with getter's credentials; when it cannot be read the operation
// runs with them and reports what it finds.
func (d *Deployer) releaseConfiguration(getter genericclioptions.RESTClientGetter, namespace, name string) (*action.Configuration, string, error) {
	cfg, err := d.configuration(getter, namespace)
	if err != nil {
		return nil, "", err
	}
	last, err := cfg.Releases.Last(name)
	if err != nil {
		return cfg, "", nil //nolint:nilerr // the caller reads the release again and reports
	}
	sa := ServiceAccountOf(last)
	if sa == "" {
		return cfg, "", nil
	}
	cfg, err = d.configuration(Impersonating(getter, ServiceAccountUser(namespace, sa)), namespace)
	return cfg, sa, err
}

// asServiceAccount names the ServiceAccount an operation acted as in err
// when the API server refused it (403 Forbidden): the account, not
// Flotilla, lacks the permission.
func asServiceAccount(err error, namespace, sa string) error {
	if err == nil || sa == "" || !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("service account %s/%s: %w", namespace, sa, err)
}

// validServiceAccount checks a ServiceAccount name as the API server does.
func validServiceAccount(name string) []string {
	if name == "" {
		return nil
	}
	return validation.IsDNS1123Subdomain(name)
}

// Actor returns getter acting as the ServiceAccount the newest record of
// release namespace/name names, and that account; getter itself and ""
// when the release names none or does not exist. What a cleanup does
// beside Helm's uninstall (deleteNamespace, removing downstream copies)
// acts as it, so the account bounds every operation of its bundle. Call
// it before the release is removed.
func (d *Deployer) Actor(getter genericclioptions.RESTClientGetter, namespace, name string) (genericclioptions.RESTClientGetter, string, error) {
	cfg, err := d.configuration(getter, namespace)
	if err != nil {
		return nil, "", err
	}
	history, err := cfg.Releases.History(name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, "", fmt.Errorf("read release %s/%s: %w", namespace, name, err)
	}
	if len(history) == 0 {
		return getter, "", nil
	}
	releaseutil.Reverse(history, releaseutil.SortByRevision)
	sa := ServiceAccountOf(history[0])
	return helmGetterOf(getter, namespace, sa), sa, nil
}
