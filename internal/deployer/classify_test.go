package deployer_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

func TestClassify(t *testing.T) {
	configMaps := schema.GroupResource{Resource: "configmaps"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6443},
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}

	tests := []struct {
		name string
		err  error
		want outcome.Class
	}{
		{"nil", nil, outcome.OK},
		{"401", apierrors.NewUnauthorized("bad token"), outcome.Unauthorized},
		{"403", apierrors.NewForbidden(configMaps, "app", errors.New("RBAC")), outcome.BundleFailed},
		{"422", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "app",
			field.ErrorList{field.Invalid(field.NewPath("data"), "bad key", "invalid")}), outcome.BundleFailed},
		{"409", apierrors.NewConflict(configMaps, "app", errors.New("modified")), outcome.BundleFailed},
		{"429", apierrors.NewTooManyRequests("slow down", 1), outcome.Unreachable},
		{"500", apierrors.NewInternalError(errors.New("etcd")), outcome.Unreachable},
		{"503", apierrors.NewServiceUnavailable("starting"), outcome.Unreachable},
		{"504", apierrors.NewTimeoutError("gateway", 1), outcome.Unreachable},
		{"dial refused", refused, outcome.Unreachable},
		{"url error", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: errors.New("no answer")}, outcome.Unreachable},
		{"x509 unknown authority", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api",
			Err: x509.UnknownAuthorityError{}}, outcome.Unreachable},
		{"bare x509 unknown authority", x509.UnknownAuthorityError{}, outcome.Unreachable},
		{"template error", errors.New(`template: probe/templates/a.yaml:3: function "nope" not defined`), outcome.BundleFailed},
		{"deployer wait timeout", fmt.Errorf("install release ns/app: %w: %w", deployer.ErrWaitTimeout,
			context.DeadlineExceeded), outcome.BundleFailed},
		{"owned by another", &deployer.OwnedError{Namespace: "ns", Name: "app", Owner: "GitRepo a/first, bundle b",
			Caller: "GitRepo a/second, bundle b"}, outcome.Invalid},
		{"busy", fmt.Errorf("release ns/app: %w: its revision 2 is pending-upgrade", deployer.ErrReleaseBusy), outcome.Unreachable},
		{"stored kubeconfig left without credentials", &cluster.KubeconfigError{Cluster: "edge", NoCredentials: true}, outcome.Unauthorized},
		{"kubeconfig refused", &cluster.KubeconfigError{Cluster: "edge"}, outcome.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, deployer.Classify(tt.err))
			if tt.err == nil {
				return
			}
			// Callers wrap errors on their way up; the class survives.
			wrapped := fmt.Errorf("upgrade release ns/app: %w", fmt.Errorf("bundle b: %w", tt.err))
			assert.Equal(t, tt.want, deployer.Classify(wrapped), "wrapped twice")
		})
	}
}

// Deploy's own errors keep the class of what happened on the way to the
// cluster: nothing listens on port 1 of the loopback address.
func TestClassify_DeployError(t *testing.T) {
	getter, err := deployer.NewRESTClientGetter(&rest.Config{Host: "https://127.0.0.1:1"}, "default")
	require.NoError(t, err)
	rel := deployer.Release{Name: "app", Namespace: "ns", DeploymentID: "id-1", Chart: &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "probe", Version: "0.1.0"},
	}}

	_, err = deployer.New(deployer.Options{}).Deploy(t.Context(), getter, rel)

	require.Error(t, err)
	assert.Equal(t, outcome.Unreachable, deployer.Classify(err), "%v", err)
}
