package activities

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// maxChangeMemo bounds the comparisons a changeMemo keeps; it starts over
// when full.
const maxChangeMemo = 4096

// unchanged reports whether commit changes nothing the GitRepo reads since
// in.Since: no file under its paths or bundles, nor any file they
// reference (gitsource.Cache.Touches, on the controller's shared clone).
// Answers are kept: commits do not change, and a GitRepo whose commit
// moved without a render compares the same pair on every poll. A
// comparison that fails counts as a change, so the commit is rendered as
// before; only the caller's cancellation is an error.
func (a *Activities) unchanged(ctx context.Context, r gitsource.Remote, in ResolveInput, commit string) (bool, error) {
	if a.Git == nil {
		return false, nil
	}
	inputs := gitsource.Inputs{Paths: in.Spec.EffectivePaths(), Bundles: in.Spec.Bundles}
	if len(in.Spec.Bundles) > 0 {
		inputs.Paths = nil // bundles replace the walk of paths, as in Fleet
	}
	key := changeKey(in.Spec.Repo, in.Since, commit, inputs)
	if touched, ok := a.changes.get(key); ok {
		return !touched, nil
	}
	touched, err := a.Git.Touches(ctx, r, in.Since, commit, inputs)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		a.Logger.Info("Commits not compared: rendering", zap.String("gitrepo", in.GitRepo.String()),
			zap.String("since", in.Since), zap.String("commit", commit), zap.Error(err))
		return false, nil
	}
	a.changes.put(key, touched)
	return !touched, nil
}

// changeMemo keeps Touches answers by changeKey. The zero value is ready
// to use and safe for concurrent use.
type changeMemo struct {
	mu      sync.Mutex
	touched map[[sha256.Size]byte]bool
}

func (m *changeMemo) get(key [sha256.Size]byte) (touched, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	touched, ok = m.touched[key]
	return touched, ok
}

func (m *changeMemo) put(key [sha256.Size]byte, touched bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.touched == nil || len(m.touched) >= maxChangeMemo {
		m.touched = map[[sha256.Size]byte]bool{}
	}
	m.touched[key] = touched
}

// changeKey identifies one comparison: the repository, both commits and
// the inputs.
func changeKey(repo, since, commit string, inputs gitsource.Inputs) [sha256.Size]byte {
	js, _ := json.Marshal(struct { // strings and slices of them always encode
		Repo, Since, Commit string
		Paths               []string
		Bundles             []api.BundlePath
	}{repo, since, commit, inputs.Paths, inputs.Bundles})
	return sha256.Sum256(js)
}
