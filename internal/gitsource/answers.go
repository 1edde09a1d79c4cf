package gitsource

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// DefaultMaxAnswers bounds an Answers' record when MaxEntries is unset.
const DefaultMaxAnswers = 512

// Answers shares ls-remote answers between the GitRepos of one controller
// that follow the same remote with the same credentials: a poll reuses an
// answer younger than its polling interval instead of asking the host,
// and concurrent asks for one remote share one request. Answers are keyed
// by the remote's URL and a SHA-256 fingerprint of the credentials and
// TLS settings (never the credentials themselves), so a GitRepo never
// gets an answer its own credentials did not earn. Failures are not kept.
//
// The zero value is ready to use and safe for concurrent use.
type Answers struct {
	// MaxEntries bounds how many remotes' answers are kept; the least
	// recently used go first. Optional: default DefaultMaxAnswers.
	MaxEntries int
	// Now is the clock. Optional: default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[string]*answerEntry
}

// answerEntry is one remote's last answer and the request under way.
type answerEntry struct {
	refs   []*plumbing.Reference
	at     time.Time // when the request that got refs was sent
	used   time.Time
	flight *answerFlight
}

// answerFlight is one ls-remote request, shared by whoever waits for it.
type answerFlight struct {
	start time.Time
	done  chan struct{}
	refs  []*plumbing.Reference
	err   error
}

// Answer is what Answers.Resolve found.
type Answer struct {
	Ref
	// Moved is set on the one call that sent the request whose answer has
	// Ref at a commit other than the previous answer for the remote did
	// (not on the first answer): other GitRepos following the ref may want
	// to check now.
	Moved bool
}

// Resolve is gitsource.Resolve through the shared answers: an answer
// whose request was sent less than maxAge ago is reused without asking
// the host; otherwise the host is asked, once for all callers that need
// an answer no older than the time they called (maxAge 0: always a
// request sent after the call).
func (a *Answers) Resolve(ctx context.Context, r Remote, branch, revision string, maxAge time.Duration) (Answer, error) {
	ep, err := r.endpoint()
	if err != nil {
		return Answer{}, err
	}
	// A full hash names its commit, but the remote is asked all the same
	// (or a shared answer for these credentials reused): it proves the
	// credentials read the repository before the shared clone serves it.
	refs, prev, asked, err := a.refs(ctx, answerKey(r), maxAge, ep.list)
	if err != nil {
		return Answer{}, err
	}
	if IsFullHash(revision) {
		h := strings.ToLower(revision)
		return Answer{Ref: Ref{Name: h, Commit: h}}, nil
	}
	ref, err := selectRef(refs, branch, revision, ep.url)
	if err != nil {
		return Answer{}, err
	}
	ans := Answer{Ref: ref}
	if asked && prev != nil {
		old, oldErr := selectRef(prev, branch, revision, ep.url)
		ans.Moved = oldErr != nil || old.Commit != ref.Commit
	}
	return ans, nil
}

// refs returns the remote's references, no older than maxAge: a stored
// answer, the answer of a request under way that was sent after the call
// less maxAge, or that of a new request (asked: this call sent it; prev
// is then the answer it replaces).
func (a *Answers) refs(ctx context.Context, key string, maxAge time.Duration,
	list func(context.Context) ([]*plumbing.Reference, error),
) (refs, prev []*plumbing.Reference, asked bool, err error) {
	need := a.now().Add(-maxAge)
	for {
		a.mu.Lock()
		e := a.entry(key)
		if maxAge > 0 && e.refs != nil && e.at.After(need) {
			a.mu.Unlock()
			return e.refs, nil, false, nil
		}
		f := e.flight
		if f == nil {
			f = &answerFlight{start: a.now(), done: make(chan struct{})}
			e.flight, prev = f, e.refs
			a.mu.Unlock()
			f.refs, f.err = list(ctx)
			a.land(key, f)
			return f.refs, prev, true, f.err
		}
		a.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		}
		// A request sent before the caller needed it, or one its sender
		// gave up on, does not answer this caller: ask again.
		if f.start.Before(need) || (isContextErr(f.err) && ctx.Err() == nil) {
			continue
		}
		return f.refs, nil, false, f.err
	}
}

// land stores a finished request's answer and releases its waiters.
func (a *Answers) land(key string, f *answerFlight) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.entries[key]; ok && e.flight == f {
		e.flight = nil
		if f.err == nil && !f.start.Before(e.at) {
			e.refs, e.at = f.refs, f.start
		}
	}
	close(f.done)
}

// entry returns key's entry, creating it and evicting the least recently
// used entries beyond MaxEntries (never one with a request under way).
// The caller holds a.mu.
func (a *Answers) entry(key string) *answerEntry {
	now := a.now()
	if e, ok := a.entries[key]; ok {
		e.used = now
		return e
	}
	if a.entries == nil {
		a.entries = map[string]*answerEntry{}
	}
	limit := a.MaxEntries
	if limit <= 0 {
		limit = DefaultMaxAnswers
	}
	for len(a.entries) >= limit {
		victim := ""
		for k, e := range a.entries {
			if e.flight == nil && (victim == "" || e.used.Before(a.entries[victim].used)) {
				victim = k
			}
		}
		if victim == "" {
			break // all busy: exceed the bound until a request lands
		}
		delete(a.entries, victim)
	}
	e := &answerEntry{used: now}
	a.entries[key] = e
	return e
}

func (a *Answers) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// answerKey is the hex SHA-256 of everything that decides what the remote
// answers r: its URL, credentials and TLS and host-key settings. Each
// field is length-prefixed so no two Remotes share an encoding.
func answerKey(r Remote) string {
	h := sha256.New()
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b))) // hash.Hash writes never fail
		h.Write(b)
	}
	field([]byte(strings.TrimSuffix(r.URL, "/")))
	if r.Auth != nil {
		field([]byte("basic"))
		field([]byte(r.Auth.Username))
		field([]byte(r.Auth.Password))
	}
	if s := r.SSH; s != nil {
		field([]byte("ssh"))
		field([]byte(s.User))
		field(s.PrivateKey)
		field(s.Passphrase)
		field(s.KnownHosts)
		field([]byte(strconv.FormatBool(s.InsecureIgnoreHostKey)))
	}
	field([]byte(strconv.FormatBool(r.InsecureSkipTLSVerify)))
	field(r.CABundle)
	return hex.EncodeToString(h.Sum(nil))
}
