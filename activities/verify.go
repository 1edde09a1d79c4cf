package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/gitverify"
)

// verify checks the signatures spec.verify asks for on ref's commit (and
// tag). verified names the key; rejected says why the commit must not be
// deployed; err is a failure to check (retried, or non-retryable for a
// missing Secret).
func (a *Activities) verify(ctx context.Context, r gitsource.Remote, in ResolveInput, ref gitsource.Ref) (verified string, rejected *Rejection, err error) {
	spec := in.Spec.Verify
	keys, err := a.verifyKeys(ctx, in.GitRepo, spec)
	if err != nil {
		return "", nil, err
	}
	mode := spec.EffectiveMode()
	memo := verdictKey{remote: r.String(), ref: ref.Name, commit: ref.Commit, tag: ref.Tag, mode: mode, keys: keys.ID()}
	if v, ok := verdicts.get(memo); ok {
		return v.verified, v.rejected, nil
	}
	var v verdict
	if name := plumbing.ReferenceName(ref.Name); mode != api.VerifyHEAD && !name.IsTag() {
		v.rejected = &Rejection{Commit: ref.Commit, Reason: fmt.Sprintf(
			"verify.mode %s needs revision to name a tag, and %s is not one", mode, ref.Name)}
	} else {
		signed, err := a.Git.Signed(ctx, r, ref)
		if err != nil {
			return "", nil, gitError(in.GitRepo, err)
		}
		// A remote that advertises no peeled tags gave the tag object's
		// hash as ref.Commit: a refusal names the commit read.
		read := ref
		read.Commit = signed.Commit.Hash.String()
		v = decide(keys, mode, read, signed)
	}
	verdicts.put(memo, v)
	return v.verified, v.rejected, nil
}

// decide checks what mode requires of a reference's objects: the annotated
// tag's signature (Tag, TagAndHEAD), the commit's (HEAD, TagAndHEAD).
func decide(keys *gitverify.Keys, mode string, ref gitsource.Ref, s gitsource.Signed) verdict {
	var signers []string
	if mode != api.VerifyHEAD {
		tag := plumbing.ReferenceName(ref.Name).Short()
		if s.Tag == nil {
			return verdict{rejected: &Rejection{Commit: ref.Commit, Tag: tag,
				Reason: fmt.Sprintf("tag %s is lightweight (not signed)", tag)}}
		}
		v := keys.CheckTag(s.Tag)
		if !v.OK() {
			return verdict{rejected: &Rejection{Commit: ref.Commit, Tag: tag, Key: v.Key, Reason: v.Reason(keys)}}
		}
		signers = append(signers, "tag "+tag+": "+v.Signer())
	}
	if mode != api.VerifyTag {
		v := keys.CheckCommit(s.Commit)
		if !v.OK() {
			return verdict{rejected: &Rejection{Commit: ref.Commit, Key: v.Key, Reason: v.Reason(keys)}}
		}
		if len(signers) == 0 {
			return verdict{verified: v.Signer()}
		}
		signers = append(signers, "commit: "+v.Signer())
	}
	return verdict{verified: strings.Join(signers, ", ")}
}

// verifyKeys reads the trusted keys of spec.verify.secretRef. A missing
// or unreadable Secret is non-retryable and named.
func (a *Activities) verifyKeys(ctx context.Context, ref GitRepoRef, spec *api.VerifySpec) (*gitverify.Keys, error) {
	name := ""
	if spec.SecretRef != nil {
		name = spec.SecretRef.Name
	}
	fail := func(why string) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: verify.secretRef %q: %s", ref.Title(), name, why),
			ErrTypeSecretNotFound, nil)
	}
	if name == "" {
		return nil, fail("no Secret named")
	}
	_, data, err := a.Secrets.SecretData(ctx, ref.Namespace, name)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		return nil, fail("no such secret in namespace " + ref.Namespace + " (apply a v1 Secret of public keys with `flotilla apply`)")
	case errors.Is(err, cluster.ErrNoData):
		return nil, fail("sealed by an older version that kept only credentials: apply it again")
	case err != nil:
		return nil, fmt.Errorf("%s: read secret %s: %w", ref.Title(), name, err)
	}
	keys, err := gitverify.ParseKeys("Secret "+ref.Namespace+"/"+name, data)
	if err != nil {
		return nil, fail(err.Error())
	}
	return keys, nil
}

// verdict is the outcome of verify: exactly one field is set.
type verdict struct {
	verified string
	rejected *Rejection
}

// verdictKey identifies a verification: the same reference of the same
// repository (its URL without credentials) at the same commit and, for an
// annotated tag, the same tag object, checked in the same mode against the
// same keys, gets the same verdict, so polls do not verify again. A tag
// re-created at the same commit is a new tag object, checked again.
type verdictKey struct{ remote, ref, commit, tag, mode, keys string }

// maxVerdicts bounds the verdicts remembered; when full they are forgotten
// all at once (each costs a read of the clone to learn again).
const maxVerdicts = 4096

// verdictMemo remembers verdicts for the worker process.
type verdictMemo struct {
	mu sync.Mutex
	m  map[verdictKey]verdict
}

var verdicts = &verdictMemo{}

func (m *verdictMemo) get(k verdictKey) (verdict, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

func (m *verdictMemo) put(k verdictKey, v verdict) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxVerdicts {
		m.m = map[verdictKey]verdict{}
	}
	m.m[k] = v
}
