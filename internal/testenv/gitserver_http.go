package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
)

const (
	// maxLoggedGitRequests bounds the request log a GitServer prints when a
	// test fails.
	maxLoggedGitRequests = 200
	// capabilityNoThin asks a pushing client for a self-contained pack;
	// go-git has no constant for it.
	capabilityNoThin capability.Capability = "no-thin"
)

// gitReply is a fully buffered HTTP response. Requests are answered only after
// the repository work is done, so a slow client never holds a repository
// lock and a failure can still become a 500.
type gitReply struct {
	status      int
	contentType string
	body        []byte
	// failure is logged but not sent: the client learns of it from body.
	failure error
}

func gitTextReply(status int, msg string) gitReply {
	return gitReply{status: status, contentType: "text/plain; charset=utf-8", body: []byte(msg + "\n")}
}

func (s *GitServer) serveHTTP(w http.ResponseWriter, req *http.Request) {
	rep, err := s.handle(req)
	if err != nil {
		rep = gitTextReply(http.StatusInternalServerError, err.Error())
		rep.failure = err
	}
	s.log.add(req, rep.status, rep.failure)
	if rep.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="testenv"`)
	}
	w.Header().Set("Content-Type", rep.contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body) // a client that went away is not the server's failure
}

func (s *GitServer) handle(req *http.Request) (gitReply, error) {
	if !s.authorized(req) {
		return gitTextReply(http.StatusUnauthorized, "authentication required"), nil
	}
	name, action, ok := splitGitPath(req.URL.Path)
	if !ok {
		return gitTextReply(http.StatusNotFound, "not found"), nil
	}
	repo := s.repo(name)
	if repo == nil {
		return gitTextReply(http.StatusNotFound, "repository not found"), nil
	}
	if action == "info/refs" {
		if req.Method != http.MethodGet {
			return gitTextReply(http.StatusMethodNotAllowed, "method not allowed"), nil
		}
		service := req.URL.Query().Get("service")
		if service != transport.UploadPackServiceName && service != transport.ReceivePackServiceName {
			return gitTextReply(http.StatusForbidden, "only the smart http protocol is served"), nil
		}
		body, err := repo.advertise(req.Context(), service)
		if err != nil {
			return gitReply{}, err
		}
		return gitReply{status: http.StatusOK, contentType: "application/x-" + service + "-advertisement", body: body}, nil
	}
	if req.Method != http.MethodPost {
		return gitTextReply(http.StatusMethodNotAllowed, "method not allowed"), nil
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-"+action+"-request" {
		return gitTextReply(http.StatusUnsupportedMediaType, "unexpected content type "+ct), nil
	}
	body, err := gitRequestBody(req)
	if err != nil {
		return gitTextReply(http.StatusBadRequest, err.Error()), nil
	}
	if action == transport.UploadPackServiceName {
		out, err := repo.uploadPack(req.Context(), body)
		if err != nil {
			return gitReply{}, err
		}
		return gitReply{status: http.StatusOK, contentType: "application/x-git-upload-pack-result", body: out}, nil
	}
	out, failure, err := repo.receivePack(req.Context(), body)
	if err != nil {
		return gitReply{}, err
	}
	return gitReply{status: http.StatusOK, contentType: "application/x-git-receive-pack-result", body: out, failure: failure}, nil
}

func (s *GitServer) authEnabled() bool {
	return s.opts.Username != "" || s.opts.Password != "" || s.opts.Authorize != nil
}

func (s *GitServer) authorized(req *http.Request) bool {
	if s.opts.Authorize != nil {
		return s.opts.Authorize(req)
	}
	if !s.authEnabled() {
		return true
	}
	user, pass, ok := req.BasicAuth()
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.Username)) == 1
	passOK := subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password)) == 1
	return ok && userOK && passOK
}

func (s *GitServer) repo(name string) *GitRepo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repos[name]
}

// splitGitPath splits a smart HTTP path such as /org/app.git/info/refs into
// the repository name ("org/app") and the action ("info/refs").
func splitGitPath(p string) (name, action string, ok bool) {
	for _, action := range []string{"info/refs", transport.UploadPackServiceName, transport.ReceivePackServiceName} {
		if prefix, found := strings.CutSuffix(p, "/"+action); found {
			return strings.TrimSuffix(strings.TrimPrefix(prefix, "/"), ".git"), action, true
		}
	}
	return "", "", false
}

func gitRequestBody(req *http.Request) (io.Reader, error) {
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return req.Body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, fmt.Errorf("read gzip request body: %w", err)
		}
		return zr, nil
	default:
		return nil, fmt.Errorf("unsupported content encoding %q", enc)
	}
}

// gitStorageLoader hands go-git's server the storage that a request opened under
// the repository lock.
type gitStorageLoader struct{ sto storer.Storer }

// Load returns the request's storage whatever the endpoint.
func (l gitStorageLoader) Load(*transport.Endpoint) (storer.Storer, error) { return l.sto, nil }

// advertise returns the smart HTTP reference advertisement for service: the
// "# service=" pkt-line, a flush and the references with capabilities.
func (r *GitRepo) advertise(ctx context.Context, service string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	srv := server.NewServer(gitStorageLoader{r.open()})
	var sess transport.Session
	var err error
	if service == transport.UploadPackServiceName {
		sess, err = srv.NewUploadPackSession(&transport.Endpoint{}, nil)
	} else {
		sess, err = srv.NewReceivePackSession(&transport.Endpoint{}, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s session: %w", service, err)
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("advertise references for %s: %w", service, err)
	}
	if service == transport.UploadPackServiceName && r.server.opts.AllowReachableSHA1InWant {
		// uploadPack serves any want the repository has.
		if err := ar.Capabilities.Add(capability.AllowReachableSHA1InWant); err != nil {
			return nil, fmt.Errorf("advertise allow-reachable-sha1-in-want: %w", err)
		}
	}
	if service == transport.ReceivePackServiceName {
		// go-git's server cannot resolve deltas against objects outside the
		// pack, so ask the git CLI not to send thin packs.
		if err := ar.Capabilities.Add(capabilityNoThin); err != nil {
			return nil, fmt.Errorf("advertise no-thin: %w", err)
		}
	}
	var buf bytes.Buffer
	enc := pktline.NewEncoder(&buf)
	if err := enc.Encodef("# service=%s\n", service); err != nil {
		return nil, fmt.Errorf("encode service header: %w", err)
	}
	if err := enc.Flush(); err != nil {
		return nil, fmt.Errorf("encode service header: %w", err)
	}
	if err := ar.Encode(&buf); err != nil {
		return nil, fmt.Errorf("encode references for %s: %w", service, err)
	}
	return buf.Bytes(), nil
}

// uploadPack answers one stateless upload-pack request. go-git's decoder
// stops after the wants, so the haves and "done" are read here; haves the
// repository does not know are dropped. A round without "done" is a
// negotiation step and is answered with NAK, as a server without multi_ack
// does; the round with "done" gets NAK and the pack.
func (r *GitRepo) uploadPack(ctx context.Context, body io.Reader) ([]byte, error) {
	req := packp.NewUploadPackRequest()
	if err := req.Decode(body); err != nil {
		return nil, fmt.Errorf("decode upload-pack request: %w", err)
	}
	haves, done, err := decodeHaves(body)
	if err != nil {
		return nil, fmt.Errorf("decode upload-pack request: %w", err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	sto := r.open()
	for _, h := range haves {
		if sto.HasEncodedObject(h) == nil {
			req.Haves = append(req.Haves, h)
		}
	}
	var buf bytes.Buffer
	if !done {
		if err := pktline.NewEncoder(&buf).Encodef("NAK\n"); err != nil {
			return nil, fmt.Errorf("encode NAK: %w", err)
		}
		return buf.Bytes(), nil
	}
	sess, err := server.NewServer(gitStorageLoader{sto}).NewUploadPackSession(&transport.Endpoint{}, nil)
	if err != nil {
		return nil, fmt.Errorf("open upload-pack session: %w", err)
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("upload pack: %w", err)
	}
	// Encode closes the pack stream; this Close only matters when Encode
	// fails early, and its error adds nothing to Encode's.
	defer func() { _ = resp.Close() }()
	if err := resp.Encode(&buf); err != nil {
		return nil, fmt.Errorf("encode upload-pack response: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeHaves reads the "have" lines that follow the wants, up to "done" or
// the end of the request.
func decodeHaves(body io.Reader) (haves []plumbing.Hash, done bool, err error) {
	sc := pktline.NewScanner(body)
	for sc.Scan() {
		line := string(bytes.TrimSuffix(sc.Bytes(), []byte("\n")))
		switch {
		case line == "": // flush-pkt between rounds of haves
		case line == "done":
			return haves, true, nil
		case strings.HasPrefix(line, "have ") && plumbing.IsHash(line[len("have "):]):
			haves = append(haves, plumbing.NewHash(line[len("have "):]))
		default:
			return nil, false, fmt.Errorf("unexpected pkt-line %q", line)
		}
	}
	return haves, false, sc.Err()
}

// receivePack answers one receive-pack (push) request. A command whose old
// value no longer matches the repository is refused, with the rest of the
// push: go-git's server would otherwise overwrite the reference and silently
// drop commits made in between. A push that failed but could still be
// reported to the client returns the report and the failure, for the log.
func (r *GitRepo) receivePack(ctx context.Context, body io.Reader) (out []byte, failure, err error) {
	req := packp.NewReferenceUpdateRequest()
	if err := req.Decode(body); err != nil {
		return nil, nil, fmt.Errorf("decode receive-pack request: %w", err)
	}
	if onlyRefDeletes(req.Commands) {
		req.Packfile = nil // deletions carry no pack
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	sto := r.open()
	rs, err := rejectStaleRefs(sto, req.Commands)
	if err != nil {
		return nil, nil, err
	}
	if rs != nil {
		failure = errors.New("push refused: stale old value")
	} else {
		sess, err := server.NewServer(gitStorageLoader{sto}).NewReceivePackSession(&transport.Endpoint{}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("open receive-pack session: %w", err)
		}
		rs, failure = sess.ReceivePack(ctx, req)
		if failure != nil {
			failure = fmt.Errorf("receive pack: %w", failure)
		}
		if rs == nil && failure != nil {
			return nil, nil, failure
		}
	}
	if rs == nil || !req.Capabilities.Supports(capability.ReportStatus) {
		return nil, failure, nil
	}
	if rs.UnpackStatus != "ok" && len(rs.CommandStatuses) == 0 {
		// Name every command, as git does, so the client shows why.
		for _, c := range req.Commands {
			rs.CommandStatuses = append(rs.CommandStatuses, &packp.CommandStatus{ReferenceName: c.Name, Status: "unpacker error"})
		}
	}
	var buf bytes.Buffer
	if err := rs.Encode(&buf); err != nil {
		return nil, nil, fmt.Errorf("encode report status: %w", err)
	}
	return buf.Bytes(), failure, nil
}

func onlyRefDeletes(cmds []*packp.Command) bool {
	for _, c := range cmds {
		if c.Action() != packp.Delete {
			return false
		}
	}
	return true
}

// rejectStaleRefs returns a report refusing every command when one of them
// expects an old value the reference no longer has, and nil otherwise.
func rejectStaleRefs(sto storer.ReferenceStorer, cmds []*packp.Command) (*packp.ReportStatus, error) {
	stale := map[plumbing.ReferenceName]bool{}
	for _, c := range cmds {
		if c.Old.IsZero() {
			continue // a create; go-git's server refuses existing references itself
		}
		ref, err := sto.Reference(c.Name)
		switch {
		case errors.Is(err, plumbing.ErrReferenceNotFound):
			stale[c.Name] = true
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", c.Name, err)
		case ref.Hash() != c.Old:
			stale[c.Name] = true
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	rs := &packp.ReportStatus{UnpackStatus: "ok"}
	for _, c := range cmds {
		status := "not updated: another reference was stale"
		if stale[c.Name] {
			status = "stale old value"
		}
		rs.CommandStatuses = append(rs.CommandStatuses, &packp.CommandStatus{ReferenceName: c.Name, Status: status})
	}
	return rs, nil
}

// gitRequestLog remembers the most recent requests a GitServer answered, so a
// failing test can show them.
type gitRequestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *gitRequestLog) add(req *http.Request, status int, err error) {
	line := fmt.Sprintf("%s %s: %d", req.Method, req.URL.RequestURI(), status)
	if err != nil {
		line += ": " + err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == maxLoggedGitRequests {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, line)
}

func (l *gitRequestLog) dump(t testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		t.Logf("git server: %s", line)
	}
}
