package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// previewAPI reports whether previews speak the API of a webhook
// provider.
func previewAPI(p webhook.Provider) bool {
	return p == webhook.GitHub || p == webhook.GitLab || p == webhook.Gitea
}

// signalPreview tells the PreviewWorkflow of a GitRepo's pull request
// about a pull request event, starting it if needed. The GitRepo's spec
// (QuerySource) says whether it previews and where the API is; a GitRepo
// without spec.previews is skipped, as is one deleted meanwhile.
func signalPreview(c client.Client, queue string) func(context.Context, webhook.Target, *webhook.Event, bool) (string, error) {
	return func(ctx context.Context, t webhook.Target, ev *webhook.Event, _ bool) (string, error) {
		v, err := c.QueryWorkflow(ctx, protocol.GitRepoID(t.Namespace, t.Name), "", protocol.QuerySource)
		var notFound *serviceerror.NotFound
		var failed *serviceerror.QueryFailed
		switch {
		case errors.As(err, &notFound), errors.As(err, &failed):
			return "not applied", nil
		case err != nil:
			return "", err
		}
		var src protocol.GitRepoSource
		if err := v.Get(&src); err != nil {
			return "", fmt.Errorf("GitRepo %s: decode source: %w", t, err)
		}
		prev := src.Spec.Previews
		if prev == nil {
			return "spec.previews is not set", nil
		}
		if prev.Provider == "" && !previewAPI(ev.Provider) {
			return "spec.previews.provider is not set and " + string(ev.Provider) + " has no preview API", nil
		}
		pr := ev.PullRequest
		if pr.Fork && !prev.Forks && pr.Action != webhook.PRClose {
			return "pull request #" + strconv.Itoa(pr.Number) + " comes from a fork; set spec.previews.forks to preview forks", nil
		}
		head := protocol.PreviewHead{Action: string(pr.Action), Commit: pr.HeadSHA, Ref: pr.HeadRef, Provider: string(ev.Provider),
			Delivery: pr.Delivery, RepoURL: src.Spec.Repo, Previews: *prev}
		id := protocol.PreviewID(t.Namespace, t.Name, pr.Number)
		if pr.Action == webhook.PRClose {
			// A closed request whose preview is not running has nothing to end.
			err := c.SignalWorkflow(ctx, id, "", protocol.SignalPreview, head)
			if errors.As(err, &notFound) {
				return "", nil
			}
			return "", err
		}
		_, err = c.SignalWithStartWorkflow(ctx, id, protocol.SignalPreview, head,
			client.StartWorkflowOptions{ID: id, TaskQueue: queue}, protocol.PreviewWorkflow,
			protocol.PreviewStart{Namespace: t.Namespace, Name: t.Name, Number: pr.Number})
		return "", err
	}
}
