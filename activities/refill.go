package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/render"
)

// RefillInput names content of one of a GitRepo's bundles that a store
// (and its registry, if it has one) misses: the bundle's manifest, the
// bundle itself, or its options on one push-mode cluster.
type RefillInput struct {
	GitRepo GitRepoRef
	// Commit the content was rendered from. Empty (a watch knows none):
	// the GitRepo's running rollout's, last rollout's and latest commits
	// are tried in turn.
	Commit string
	// Spec the content was rendered with. Nil: the GitRepo's spec now.
	Spec *api.GitRepoSpec
	// Bundle is the bundle's name.
	Bundle string
	// ManifestID, when set, is the manifest wanted.
	ManifestID string
	// BundleKey is the stored bundle wanted; with OptionsHash, the one
	// the options are computed from when the store holds it.
	BundleKey string
	// Cluster and OptionsHash, when set, ask for the bundle's options on
	// that cluster.
	Cluster     string
	OptionsHash string
}

// Refiller re-derives content a store misses (see Refill).
type Refiller func(ctx context.Context, in RefillInput) error

// Refill returns a's refill, the hook through which the controller's
// ClusterActivities re-derive content their store misses. It is a
// function rather than a method so that registering a as activities does
// not register it.
func Refill(a *Activities) Refiller { return a.refill }

// refill re-derives content of a GitRepo's bundle that this controller's
// store misses (the store is a cache, and another replica may have
// rendered the rollout) and stores it locally. It renders the commit again
// as Render does, through the Git and chart caches and with the GitRepo's
// credentials, and for a cluster's options targets the cluster again as
// TargetBundles does, with the cluster's record as it is now. What it
// derives must have the ID asked for: otherwise it fails with
// ErrContentChanged, naming the bundle (and cluster) and why, and stores
// nothing under the ID asked for. Concurrent refills of one commit render
// it once, and the IDs of recent renders are remembered, so that refilling
// the options of many clusters renders nothing more.
//
// refill does not heartbeat: activities that call it keep themselves
// alive.
func (a *Activities) refill(ctx context.Context, in RefillInput) error {
	spec, commits, err := a.refillSource(ctx, in)
	if err != nil {
		return err
	}
	var changed []*changedError
	for _, commit := range commits {
		err := a.refillAt(ctx, renderSource{ref: in.GitRepo, spec: spec, commit: commit}, in)
		var ce *changedError
		if !errors.As(err, &ce) {
			return err
		}
		changed = append(changed, ce)
	}
	return changedFailure(changed, in.Spec != nil)
}

// refillSource returns the spec and the commits to render in from: in's
// own, else the GitRepo's (QuerySource).
func (a *Activities) refillSource(ctx context.Context, in RefillInput) (api.GitRepoSpec, []string, error) {
	if in.Spec != nil && in.Commit != "" {
		return *in.Spec, []string{in.Commit}, nil
	}
	src, err := a.gitRepoSource(ctx, in.GitRepo)
	if err != nil {
		return api.GitRepoSpec{}, nil, err
	}
	spec, commits := src.Spec, src.Commits()
	if in.Spec != nil {
		spec = *in.Spec
	}
	if in.Commit != "" {
		commits = []string{in.Commit}
	}
	if len(commits) == 0 {
		return spec, nil, fmt.Errorf("%s has no commit to render bundle %s from", in.GitRepo.Title(), in.Bundle)
	}
	return spec, commits, nil
}

// gitRepoSource asks the GitRepo's workflow what it renders from;
// concurrent asks share one query.
func (a *Activities) gitRepoSource(ctx context.Context, ref GitRepoRef) (protocol.GitRepoSource, error) {
	ch := a.refills.queries.DoChan(ref.String(), func() (any, error) {
		// The shared query must not fail because the caller that started
		// it gave up.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sourceQueryTimeout)
		defer cancel()
		var src protocol.GitRepoSource
		v, err := a.Client.QueryWorkflow(qctx, ref.WorkflowID(), "", protocol.QuerySource)
		if err == nil {
			err = v.Get(&src)
		}
		if err != nil {
			return src, fmt.Errorf("ask GitRepo %s what it renders from: %w", ref, err)
		}
		return src, nil
	})
	return await[protocol.GitRepoSource](ctx, ch)
}

// refillAt refills in from the GitRepo's bundles at src.
func (a *Activities) refillAt(ctx context.Context, src renderSource, in RefillInput) error {
	b, err := a.storedBundle(in)
	manifestID := in.ManifestID
	if err != nil {
		var rb Bundle
		if rb, b, err = a.renderedBundle(ctx, src, in); err != nil {
			return err
		}
		manifestID = rb.ManifestID
	}
	if in.OptionsHash == "" {
		return nil
	}
	return a.refillOptions(ctx, src, in, b, manifestID)
}

// storedBundle returns the bundle in's options are computed from when no
// render is needed: in asks for options only, of a bundle the store
// holds.
func (a *Activities) storedBundle(in RefillInput) (bundle.Bundle, error) {
	if in.ManifestID != "" || in.BundleKey == "" || in.OptionsHash == "" {
		return bundle.Bundle{}, content.ErrNotFound
	}
	return a.Content.WithRemote(nil).GetBundle(in.BundleKey)
}

// renderedBundle finds in's bundle among the GitRepo's bundles at src, as
// a recent render left them or else rendered again, checks it against
// what in asks for, and returns it once the store holds its content.
func (a *Activities) renderedBundle(ctx context.Context, src renderSource, in RefillInput) (Bundle, bundle.Bundle, error) {
	var (
		rb  Bundle
		b   bundle.Bundle
		err error
	)
	for _, fresh := range []bool{false, true} {
		var bundles []Bundle
		bundles, err = a.refills.render(ctx, src.key(), fresh, func(ctx context.Context) ([]Bundle, error) {
			return a.rerender(ctx, src)
		})
		if err != nil {
			return Bundle{}, bundle.Bundle{}, err
		}
		if rb, err = src.pick(bundles, in); err != nil {
			return Bundle{}, bundle.Bundle{}, err
		}
		if b, err = a.holds(rb, in); !errors.Is(err, content.ErrNotFound) {
			break
		}
		// A remembered render whose content left the store since (its
		// directory was emptied): render again.
	}
	return rb, b, err
}

// rerender renders the GitRepo at src into the content store.
func (a *Activities) rerender(ctx context.Context, src renderSource) ([]Bundle, error) {
	out, err := a.render(ctx, RenderInput{GitRepo: src.ref, Spec: src.spec, Commit: src.commit}, func(string) {})
	if err != nil {
		return nil, err
	}
	a.Logger.Info("Rendered commit again for missing content", zap.String("gitrepo", src.ref.String()),
		zap.String("commit", src.commit), zap.Int("bundles", len(out.Bundles)))
	return out.Bundles, nil
}

// holds returns rb's stored bundle once the store holds what in asks for:
// the bundle, and its manifest if in asks for one.
func (a *Activities) holds(rb Bundle, in RefillInput) (bundle.Bundle, error) {
	local := a.Content.WithRemote(nil)
	if in.ManifestID != "" {
		if _, err := local.GetManifest(rb.ManifestID); err != nil {
			return bundle.Bundle{}, err
		}
	}
	return local.GetBundle(rb.BundleKey)
}

// refillOptions computes b's options on in.Cluster as TargetBundles does,
// checks their hash and stores them locally (a push-mode cluster's
// options never go to the registry).
func (a *Activities) refillOptions(ctx context.Context, src renderSource, in RefillInput, b bundle.Bundle, manifestID string) error {
	rec, err := a.clusterRecord(ctx, in.Cluster)
	if err != nil {
		return err
	}
	groups, err := cluster.NewRegistry(a.Client, a.DataConverter).Groups(ctx)
	if err != nil {
		return fmt.Errorf("read cluster groups: %w", err)
	}
	bc, err := bundleCluster(rec, src.ref.Namespace, targetGroups(groups))
	if err != nil {
		return fmt.Errorf("cluster %s: %w", in.Cluster, err)
	}
	dep, err := render.ForGitRepo(b, manifestID, bc, src.spec)
	what := fmt.Sprintf("bundle %s of GitRepo %s at commit %s", in.Bundle, src.ref, shortCommit(src.commit))
	switch {
	case err != nil:
		return &changedError{what: fmt.Sprintf("%s: cluster %s: %v", what, in.Cluster, err), cluster: true}
	case !dep.Deploy:
		return &changedError{what: fmt.Sprintf("%s no longer targets cluster %s", what, in.Cluster), cluster: true}
	}
	if err := a.refillDownstream(ctx, &dep, manifestID, in.Cluster, src.ref.Namespace); err != nil {
		return err
	}
	if hash := dep.Options.Key(); hash != in.OptionsHash {
		return &changedError{what: fmt.Sprintf("%s has options %s on cluster %s, not %s", what, hash, in.Cluster, in.OptionsHash),
			cluster: true}
	}
	if _, err := a.Content.WithRemote(nil).PutOptionsContext(ctx, dep.Options); err != nil {
		return fmt.Errorf("store options of bundle %s for cluster %s: %w", in.Bundle, in.Cluster, err)
	}
	return nil
}

// clusterRecord reads a registered cluster's record from its workflow.
func (a *Activities) clusterRecord(ctx context.Context, name string) (protocol.ClusterRecord, error) {
	var rec protocol.ClusterRecord
	v, err := a.Client.QueryWorkflow(ctx, protocol.ClusterID(name), "", protocol.QueryStatus)
	if err == nil {
		err = v.Get(&rec)
	}
	if err != nil {
		return rec, fmt.Errorf("read cluster %s: %w", name, err)
	}
	if rec.Removed {
		return rec, fmt.Errorf("cluster %s was removed", name)
	}
	return rec, nil
}

// renderSource is what a refill renders: a GitRepo at a commit with a
// spec.
type renderSource struct {
	ref    GitRepoRef
	spec   api.GitRepoSpec
	commit string
}

// key identifies the render of s.
func (s renderSource) key() string {
	// Marshalling plain data cannot fail; were it to, every spec would
	// share the key of the GitRepo and commit, and the check of the IDs
	// would still catch a wrong render.
	spec, _ := json.Marshal(s.spec)
	sum := sha256.Sum256(append([]byte(s.ref.String()+"\x00"+s.commit+"\x00"), spec...))
	return hex.EncodeToString(sum[:])
}

// pick returns in's bundle among the bundles rendered from s, checked
// against the manifest ID in asks for and, when in asks for the bundle
// itself, its key. A request for options is checked by their hash later.
func (s renderSource) pick(bundles []Bundle, in RefillInput) (Bundle, error) {
	what := fmt.Sprintf("bundle %s of GitRepo %s at commit %s", in.Bundle, s.ref, shortCommit(s.commit))
	for _, rb := range bundles {
		if rb.Name != in.Bundle {
			continue
		}
		switch {
		case in.ManifestID != "" && rb.ManifestID != in.ManifestID:
			return rb, &changedError{what: fmt.Sprintf("%s renders to manifest %s, not %s", what, rb.ManifestID, in.ManifestID)}
		case in.OptionsHash == "" && in.BundleKey != "" && rb.BundleKey != in.BundleKey:
			return rb, &changedError{what: fmt.Sprintf("%s renders to bundle %s, not %s", what, rb.BundleKey, in.BundleKey)}
		}
		return rb, nil
	}
	return Bundle{}, &changedError{what: fmt.Sprintf("%s at commit %s renders no bundle %s", s.ref.Title(), shortCommit(s.commit), in.Bundle)}
}

// ErrContentChanged is the error (wrapped) of a refill whose content
// derives to something else now than when the rollout planned with it.
// The activities that refill report it as ErrTypeContentChanged (or, for
// a deploy, as the bundle's ContentUnavailable outcome).
var ErrContentChanged = errors.New("content changed since it was planned")

// changedError is content that derives to something else now than when
// the rollout planned with it.
type changedError struct {
	// what names the content and what it derives to now, and why.
	what string
	// cluster: the difference may come from the cluster's record.
	cluster bool
}

func (e *changedError) Error() string { return e.what }

// Is makes the error ErrContentChanged without adding its text.
func (e *changedError) Is(target error) bool { return target == ErrContentChanged }

// changedFailure is the failure of a refill whose every candidate derived
// to something else; exact says the spec was the one the content was
// rendered with.
func changedFailure(changed []*changedError, exact bool) error {
	whats := make([]string, len(changed))
	cause := "the GitRepo's spec (or a chart it pulls) changed since this rollout was planned; the next rollout replaces it"
	for i, c := range changed {
		whats[i] = c.what
		if c.cluster {
			cause = "the cluster's labels or the GitRepo's spec changed since this rollout was planned; the next rollout replaces it"
		}
	}
	if exact {
		cause = "something it renders from besides Git (a chart it pulls) changed since it was rendered; the next rollout renders it again"
	}
	return &changedError{what: strings.Join(whats, "; ") + ": " + cause}
}

// shortCommit abbreviates a commit for messages.
func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// Bounds of refills.
const (
	// recentRenders is how many renders a controller remembers the
	// bundles of (names and IDs only).
	recentRenders = 32
	// refillRenderTimeout bounds a render shared by refills, as the
	// Render activity's own timeout does.
	refillRenderTimeout = 10 * time.Minute
	// sourceQueryTimeout bounds a query of a GitRepo's source.
	sourceQueryTimeout = 30 * time.Second
)

// refills deduplicates refill's work: a fresh replica misses the content
// of a rollout's every cluster at once, and concurrent renders of one
// GitRepo, commit and spec share one render, as concurrent queries of one
// GitRepo share one query. The bundles of the last renders are
// remembered, so refilling one cluster after another renders nothing
// more.
type refills struct {
	renders singleflight.Group
	queries singleflight.Group
	mu      sync.Mutex
	// recent are the last renders, oldest first.
	recent []renderedCommit
}

type renderedCommit struct {
	key     string
	bundles []Bundle
}

// render returns the bundles of the render key: remembered (unless
// fresh), or rendered by fn, once for all concurrent callers. Each caller
// stops waiting when its own ctx ends; the render goes on for the others.
func (r *refills) render(ctx context.Context, key string, fresh bool, fn func(context.Context) ([]Bundle, error)) ([]Bundle, error) {
	if !fresh {
		if bundles, ok := r.remembered(key); ok {
			return bundles, nil
		}
	}
	ch := r.renders.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refillRenderTimeout)
		defer cancel()
		bundles, err := fn(rctx)
		if err == nil {
			r.remember(key, bundles)
		}
		return bundles, err
	})
	return await[[]Bundle](ctx, ch)
}

func (r *refills) remembered(key string) ([]Bundle, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rc := range r.recent {
		if rc.key == key {
			return rc.bundles, true
		}
	}
	return nil, false
}

func (r *refills) remember(key string, bundles []Bundle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.recent[:0]
	for _, rc := range r.recent {
		if rc.key != key {
			kept = append(kept, rc)
		}
	}
	r.recent = append(kept, renderedCommit{key: key, bundles: bundles})
	if n := len(r.recent) - recentRenders; n > 0 {
		r.recent = r.recent[n:]
	}
}

// await returns the result of a shared call, or ctx's error once ctx
// ends first.
func await[T any](ctx context.Context, ch <-chan singleflight.Result) (T, error) {
	var zero T
	select {
	case res := <-ch:
		if res.Err != nil {
			return zero, res.Err
		}
		return res.Val.(T), nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
