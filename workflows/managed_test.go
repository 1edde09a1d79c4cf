package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// TestCheckApply_ManagedBy: once the management cluster applied a GitRepo,
// an apply from the CLI (ManagedBy "") is refused, naming where to change
// it; the management controller's own applies and a first apply from
// either door go through.
func TestCheckApply_ManagedBy(t *testing.T) {
	tests := []struct {
		name           string
		stored, caller string
		wantRefused    bool
	}{
		{"cli over cli", "", "", false},
		{"kubernetes takes over a cli one", "", protocol.ManagedByKubernetes, false},
		{"kubernetes over kubernetes", protocol.ManagedByKubernetes, protocol.ManagedByKubernetes, false},
		{"cli over kubernetes", protocol.ManagedByKubernetes, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &gitRepo{ref: activities.GitRepoRef{Namespace: "team-a", Name: "app"}, s: GitRepoState{ManagedBy: tt.stored}}
			err := g.checkApply(api.KindGitRepo, api.ObjectMeta{Namespace: "team-a", Name: "app"}, tt.caller, func() error { return nil })
			if !tt.wantRefused {
				assert.NoError(t, err)
				return
			}
			var ae *temporal.ApplicationError
			if assert.True(t, errors.As(err, &ae)) {
				assert.Equal(t, ErrTypeManaged, ae.Type())
				assert.True(t, ae.NonRetryable())
				assert.Equal(t, "GitRepo team-a/app is managed from the management cluster (kubectl): change it there, or delete it there first", ae.Message())
			}
		})
	}
}
