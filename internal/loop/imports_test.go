package loop

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbidden are the module paths a decision package must not link: the
// decisions (what to start, supersede, retry, how a failure is shown) are
// pure functions of values, testable and reusable without Helm, a
// Kubernetes client or Temporal's SDK.
var forbidden = []string{"helm.sh/helm/", "k8s.io/client-go/", "go.temporal.io/sdk/"}

// TestDecisionPackagesArePure fails when a decision package imports, even
// indirectly, Helm, client-go or Temporal's SDK. (fleet.yaml's model, which
// targeting and strategies read, is internal/fleetyaml, apart from the
// renderer in internal/bundle.) A package listed in pending is known to
// link one still: once it does not, the test says to move it to pure.
func TestDecisionPackagesArePure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const module = "github.com/flotilla-gitops/flotilla/internal/"
	pure := []string{"loop", "outcome", "status", "rollout", "target", "strategy", "fleetyaml"}
	var pending []string
	for _, pkg := range append(append([]string{}, pure...), pending...) {
		out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
		require.NoError(t, err, "go list -deps %s: %s", pkg, out)
		var bad []string
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					bad = append(bad, dep)
				}
			}
		}
		if isPending := strings.Contains(" "+strings.Join(pending, " ")+" ", " "+pkg+" "); isPending {
			assert.NotEmpty(t, bad, "internal/%s no longer links Helm, client-go or the SDK: move it from pending to pure", pkg)
			continue
		}
		assert.Empty(t, bad, "decision package internal/%s links these; keep I/O and SDK code out of it", pkg)
	}
}
