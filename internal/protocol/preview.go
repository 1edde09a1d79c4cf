package protocol

import (
	"strconv"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// PreviewWorkflow is the type name of the workflow previewing one pull
// (merge) request for one GitRepo (ID PreviewID): it plans each new head
// and reports the plan as a PR comment and a commit status.
const PreviewWorkflow = "PreviewWorkflow"

// SignalPreview tells a PreviewWorkflow about a pull request event
// (PreviewHead); the webhook receiver signals-with-start it.
const SignalPreview = "preview"

// QueryPreview returns a PreviewWorkflow's PreviewState.
const QueryPreview = "preview"

// PreviewID is the ID of the preview of pull request number of the
// GitRepo namespace/name: "preview/<namespace>/<name>/<number>".
func PreviewID(namespace, name string, number int) string {
	return "preview/" + namespace + "/" + name + "/" + strconv.Itoa(number)
}

// The actions of a PreviewHead.
const (
	PreviewOpen   = "open"
	PreviewUpdate = "update"
	PreviewClose  = "close"
)

// PreviewHead is one pull request event for a GitRepo's preview. It names
// the API token's Secret, never holds the token.
type PreviewHead struct {
	// Action is open, update or close (close ends the preview).
	Action string `json:"action"`
	// Commit is the head commit; Ref the ref the GitRepo's remote serves
	// it at (refs/pull/N/head, refs/merge-requests/N/head).
	Commit string `json:"commit,omitempty"`
	Ref    string `json:"ref,omitempty"`
	// Provider is the webhook's provider (github, gitlab, gitea): the API
	// spoken when Previews.Provider is empty.
	Provider string `json:"provider"`
	// Delivery is the webhook delivery's ID, for the log.
	Delivery string `json:"delivery,omitempty"`
	// RepoURL is the GitRepo's spec.repo; Previews its spec.previews when
	// the event came.
	RepoURL  string           `json:"repoURL"`
	Previews api.PreviewsSpec `json:"previews"`
}

// PreviewStart starts (and continues) a PreviewWorkflow.
type PreviewStart struct {
	// Namespace and Name name the GitRepo; Number the pull request.
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Number    int          `json:"number"`
	State     PreviewState `json:"state"`
}

// PreviewState is what a preview remembers across heads and runs.
type PreviewState struct {
	// CommentID is the PR comment the preview updates (0: none yet).
	CommentID int64 `json:"commentID,omitempty"`
	// Planned is the last head planned; Summary its status description.
	Planned string `json:"planned,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Pending is the newest head not planned yet.
	Pending *PreviewHead `json:"pending,omitempty"`
	// Config is the last event's API settings (provider, repository,
	// previews), used for every report.
	Config PreviewHead `json:"config"`
	// Plans counts the heads planned.
	Plans int `json:"plans,omitempty"`
}
