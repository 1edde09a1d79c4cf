package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/flotilla-gitops/flotilla/internal/httpserver"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// defaultWebhookListen is where the controller receives Git webhooks.
const defaultWebhookListen = "127.0.0.1:8080"

// maxTargetQueries bounds the GitRepo queries one delivery runs at once.
const maxTargetQueries = 8

// webhookTimeouts are the webhook server's timeouts: a 10 MiB body at
// 200 KiB/s is read within Read, and handling a delivery (a GitRepo lookup
// and signals through Temporal) within Write. An idle kept-alive
// connection holds one of --webhook-max-connections, so it is closed
// soon.
func webhookTimeouts() httpserver.Timeouts {
	return httpserver.Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: time.Minute, Idle: 30 * time.Second}
}

// webhookFlags configure the controller's webhook receiver.
type webhookFlags struct {
	Listen           string
	SecretsDir       string
	RequireSignature bool
	MaxBody          int64
	DedupeWindow     time.Duration
	MaxConnections   int
	MaxInFlight      int
}

// defaultWebhookMaxConnections bounds the webhook server's open
// connections: Git hosts send a delivery per connection, or keep a few
// alive.
const defaultWebhookMaxConnections = 256

func (f *webhookFlags) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Listen, "webhook-listen", defaultWebhookListen, `host:port receiving Git webhooks at / and /webhooks/<provider> ("" disables)`)
	fs.StringVar(&f.SecretsDir, "webhook-secrets", "", "directory of global webhook secrets, one file per key: github, gitlab, gitea, gogs, bitbucket, bitbucket-server, azure-username, azure-password (a mounted Kubernetes Secret); re-read on every delivery")
	fs.BoolVar(&f.RequireSignature, "webhook-require-signature", false, "refuse deliveries that no secret (global or the GitRepo's webhookSecret) applies to")
	fs.Int64Var(&f.MaxBody, "webhook-max-body", webhook.DefaultMaxBody, "largest webhook body accepted, in bytes (larger: 413)")
	fs.DurationVar(&f.DedupeWindow, "webhook-dedupe-window", webhook.DefaultDedupeWindow, "how long a delivery ID is remembered, so a redelivery is not handled twice")
	fs.IntVar(&f.MaxConnections, "webhook-max-connections", defaultWebhookMaxConnections, "most connections the webhook server keeps open; more wait to be accepted")
	fs.IntVar(&f.MaxInFlight, "webhook-max-in-flight", webhook.DefaultMaxInFlight, "most deliveries read and handled at once, bodies included (at most this many times --webhook-max-body in memory); more are answered 429 with Retry-After")
}

func (f *webhookFlags) validate() error {
	if f.MaxBody < 1 {
		return errors.New("--webhook-max-body must be positive")
	}
	if f.DedupeWindow < 0 {
		return errors.New("--webhook-dedupe-window must not be negative")
	}
	if f.MaxConnections < 1 || f.MaxInFlight < 1 {
		return errors.New("--webhook-max-connections and --webhook-max-in-flight must be positive")
	}
	if f.MaxInFlight > f.MaxConnections {
		return errors.New("--webhook-max-in-flight must not exceed --webhook-max-connections")
	}
	return nil
}

// webhookSecrets reads the webhook keys of a GitRepo's webhookSecret (a
// cluster.Vault).
type webhookSecrets interface {
	LoadWebhook(namespace, name string) (map[string]string, error)
}

// serveWebhooks starts the webhook receiver on --webhook-listen until ctx
// ends. Deliveries become durable push signals of the GitRepo workflows
// of the pushed repository; pull request events signal-with-start the
// PreviewWorkflows (on queue) of the GitRepos that set spec.previews.
func serveWebhooks(ctx context.Context, f webhookFlags, c client.Client, queue string, secrets webhookSecrets, logger *zap.Logger) error {
	if f.Listen == "" {
		return nil
	}
	logger = logger.Named("webhook")
	var global func() (map[webhook.Provider]webhook.Secret, error)
	if f.SecretsDir != "" {
		global = webhook.DirSecrets(f.SecretsDir)
	}
	recv := webhook.NewReceiver(webhook.Config{
		Targets:       gitRepoTargets(c, logger),
		Signal:        signalPush(c),
		Preview:       signalPreview(c, queue),
		GlobalSecrets: global,
		RepoSecret: func(ns, name string, p webhook.Provider) (webhook.Secret, error) {
			keys, err := secrets.LoadWebhook(ns, name)
			if err != nil {
				return webhook.Secret{}, err
			}
			return webhook.SecretFor(p, keys), nil
		},
		RequireSignature: f.RequireSignature,
		MaxBody:          f.MaxBody,
		MaxInFlight:      f.MaxInFlight,
		DedupeWindow:     f.DedupeWindow,
		Logger:           logger,
	})
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("--webhook-listen %s: %w (pick another address, or \"\" to receive no webhooks)", f.Listen, err)
	}
	// Connections past the limit wait in the listen backlog, unread, until
	// one closes; the receiver's in-flight bound then answers 429.
	ln = netutil.LimitListener(ln, f.MaxConnections)
	serve(ctx, ln, newWebhookMetrics(prometheus.DefaultRegisterer).wrap(recv), webhookTimeouts(), "Webhook server", logger)
	logger.Info("Serving webhooks", zap.String("address", ln.Addr().String()),
		zap.Bool("globalSecrets", f.SecretsDir != ""), zap.Bool("requireSignature", f.RequireSignature))
	return nil
}

// gitRepoTargets finds the running GitRepo workflows whose normalised
// repository URL (the FlotillaRepoURL search attribute) is one of keys,
// and asks each what it follows.
func gitRepoTargets(c client.Client, logger *zap.Logger) func(context.Context, []string) ([]webhook.Target, error) {
	return func(ctx context.Context, keys []string) ([]webhook.Target, error) {
		var conds []string
		for _, k := range keys {
			if strings.ContainsAny(k, `'"\`) {
				continue // cannot be a GitRepo's key: RepoKey output of a quoted URL
			}
			conds = append(conds, fmt.Sprintf("%s = '%s'", temporalx.SearchAttrRepoURL, k))
		}
		if len(conds) == 0 {
			return nil, nil
		}
		query := temporalx.RunningOfType(protocol.GitRepoWorkflow) + " AND (" + strings.Join(conds, " OR ") + ")"
		var ids []string
		if err := temporalx.EachWorkflow(ctx, c, query, func(id string) error { ids = append(ids, id); return nil }); err != nil {
			return nil, err
		}
		targets := make([]*webhook.Target, len(ids))
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxTargetQueries)
		for i, id := range ids {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				targets[i], errs[i] = gitRepoTarget(ctx, c, id)
			})
		}
		wg.Wait()
		var out []webhook.Target
		for i, t := range targets {
			var failed *serviceerror.QueryFailed
			switch {
			case errors.As(errs[i], &failed):
				// Not applied yet, or being deleted: nothing to signal.
				logger.Debug("GitRepo skipped", zap.String("workflow", ids[i]), zap.Error(errs[i]))
			case errs[i] != nil:
				return nil, errs[i]
			case t != nil:
				out = append(out, *t)
			}
		}
		return out, nil
	}
}

func gitRepoTarget(ctx context.Context, c client.Client, id string) (*webhook.Target, error) {
	rest, isGitRepo := strings.CutPrefix(id, "gitrepo/")
	ns, name, ok := strings.Cut(rest, "/")
	if !isGitRepo || !ok {
		return nil, nil
	}
	v, err := c.QueryWorkflow(ctx, id, "", protocol.QueryWebhookTarget)
	if err != nil {
		return nil, err
	}
	var wt protocol.WebhookTarget
	if err := v.Get(&wt); err != nil {
		return nil, fmt.Errorf("GitRepo %s/%s: decode webhook target: %w", ns, name, err)
	}
	return &webhook.Target{Namespace: ns, Name: name, Branch: wt.Branch, Revision: wt.Revision, WebhookSecret: wt.WebhookSecret}, nil
}

// signalPush sends the durable push signal; a GitRepo deleted meanwhile is
// not an error.
func signalPush(c client.Client) func(context.Context, webhook.Target, *webhook.Event, webhook.Change, bool) error {
	return func(ctx context.Context, t webhook.Target, ev *webhook.Event, ch webhook.Change, authenticated bool) error {
		err := c.SignalWorkflow(ctx, protocol.GitRepoID(t.Namespace, t.Name), "", protocol.SignalPush,
			protocol.Push{Provider: string(ev.Provider), Delivery: ev.Delivery, Ref: ch.Ref, Commit: ch.Commit,
				Authenticated: authenticated})
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
}
