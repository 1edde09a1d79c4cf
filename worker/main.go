package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"k8s.io/klog/v2"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/buildinfo"
	"github.com/flotilla-gitops/flotilla/internal/devserver"
	"github.com/flotilla-gitops/flotilla/internal/envflag"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

const envPrefix = "FLOTILLA"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-worker: "+err.Error())
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "flotilla-worker",
		Short:         "Run Flotilla's Temporal worker (controller role); --dev also runs an embedded Temporal server and UI",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PreRunE:       func(cmd *cobra.Command, _ []string) error { return envflag.Apply(cmd.Flags(), envPrefix) },
		RunE:          untilSignal(func(ctx context.Context) error { return run(ctx, o) }),
	}
	o.bindFlags(cmd.Flags())
	envflag.Annotate(cmd.Flags(), envPrefix)
	cmd.AddCommand(newAgentCommand(), newKeygenCommand())
	cmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the worker version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			cmd.Println("flotilla-worker " + buildinfo.Get().Version)
		},
	})
	return cmd
}

// untilSignal runs fn with a context that SIGINT and SIGTERM cancel; being
// asked to stop, even mid-start, is a clean exit.
func untilSignal(fn func(ctx context.Context) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := fn(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}

func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	logger, err := o.Log.New()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }() // stderr sync errors are not actionable
	// client-go (leader election, informers) logs through klog: into the
	// same JSON lines, not klog's own format on stderr.
	klog.SetLogger(zapr.NewLogger(logger.Named("kubernetes")))

	ln, err := listenHTTP(o.HTTPListen)
	if err != nil {
		return err
	}
	if ln != nil {
		defer func() { _ = ln.Close() }() // already closed once served
	}
	var uiOrigin string
	if o.devMode() {
		o.DevSrv.CodecEndpoint = devCodecEndpoint(&o, ln, logger)
		srv, err := startDevServer(ctx, &o, logger)
		if err != nil {
			return err
		}
		defer srv.Stop()
		uiOrigin = srv.UIURL()
	}
	cr, err := newCodecRoute(&o, uiOrigin)
	if err != nil {
		return err
	}

	if err := exportSDKMetrics(o.HTTPListen, &o.Temporal); err != nil {
		return err
	}
	c, err := o.Temporal.Dial(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	return runController(ctx, o, c, ln, cr, logger)
}

// runController serves the health, metrics and codec endpoints on ln (if
// any), runs the controller's worker and the webhook receiver, and returns
// when ctx is done.
func runController(ctx context.Context, o options, c client.Client, ln net.Listener, cr *codecRoute, logger *zap.Logger) error {
	p := &probe{}
	p.setReady(false, "starting")
	if ln != nil {
		serveOn(ctx, ln, p, cr, o.Pprof, logger)
	}
	st, err := o.controllerStores(c, logger)
	if err != nil {
		return err
	}
	agents, err := o.agentActivities(st, logger)
	if err != nil {
		return err
	}
	agents.Credential = credentialIssuer(c, o.Temporal.Namespace, st.sealing.Opener)
	stop, err := startControllerWorkers(c, o, st, agents, logger)
	if err != nil {
		return err
	}
	go st.git.PruneEvery(ctx, 0) // idle clones go although nothing new is checked out
	if err := publishKeys(ctx, c, o.TaskQueue, st.sealing, logger); err != nil {
		stop()
		return err
	}
	importStateDir(ctx, c, o.TaskQueue, o.DevSrv.StateDir, st.sealing, logger)
	if err := serveWebhooks(ctx, o.Webhook, c, o.TaskQueue, st.sealing.Vault, logger); err != nil {
		stop()
		return err
	}
	if err := serveGateway(ctx, o, c, st, logger); err != nil {
		stop()
		return err
	}
	if err := startManagement(ctx, o.Management, c, o.TaskQueue, st.sealing, o.registration(), logger); err != nil {
		stop()
		return err
	}
	p.setReady(true, "")
	go announceAgentDefaults(ctx, c, activities.AgentDefaultsHash(agents), logger)
	logger.Info("Worker started",
		zap.String("temporalAddress", o.Temporal.Address),
		zap.String("namespace", o.Temporal.Namespace),
		zap.String("taskQueue", o.TaskQueue),
		zap.String("version", buildinfo.Get().Version))

	<-ctx.Done()
	logger.Info("Worker stopping")
	stop()
	return nil
}

// controllerStores opens the controller's state directory with the
// flags' chart mirrors, bounds, Git settings and sealing keys.
func (o options) controllerStores(c client.Client, logger *zap.Logger) (*stores, error) {
	mirrors, err := o.mirrors()
	if err != nil {
		return nil, err
	}
	st, err := openStores(o.DevSrv.StateDir, mirrors, o.Registry)
	if err != nil {
		return nil, err
	}
	o.Limits.apply(st)
	st.gitFlags = o.Git
	if st.sealing, err = o.openSealing(c, logger); err != nil {
		return nil, err
	}
	return st, nil
}

// startControllerWorkers starts the controller's worker on --task-queue
// and the drift watches' worker on its watch queue (protocol.WatchQueue),
// and returns what stops both.
func startControllerWorkers(c client.Client, o options, st *stores, agents *activities.AgentActivities, logger *zap.Logger) (func(), error) {
	dc, err := o.Temporal.DataConverter()
	if err != nil {
		return nil, err
	}
	w := worker.New(c, o.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     o.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: o.MaxConcurrentWorkflowTasks,
		// Two pollers (the SDK's default) take a rollout's thousand
		// deploys off the queue one round trip at a time; the server's
		// feedback scales them to the backlog.
		ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
	})
	watches := worker.New(c, protocol.WatchQueue(o.TaskQueue), worker.Options{MaxConcurrentActivityExecutionSize: maxWatches})
	registerController(w, watches, c, dc, st, agents, o.rolloutPolicy(), logger)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker on task queue %s: %w", o.TaskQueue, err)
	}
	if err := watches.Start(); err != nil {
		w.Stop()
		return nil, fmt.Errorf("start worker on task queue %s: %w", protocol.WatchQueue(o.TaskQueue), err)
	}
	return func() { watches.Stop(); w.Stop() }, nil
}

// maxWatches bounds the drift watches one controller runs at once (one
// per push-mode cluster, mostly idle: an informer per watched kind).
const maxWatches = 20000

func startDevServer(ctx context.Context, o *options, logger *zap.Logger) (*devserver.Server, error) {
	o.DevSrv.Namespace = o.Temporal.Namespace
	o.DevSrv.SearchAttributes = temporalx.SearchAttributes()
	o.DevSrv.Logger = logger
	srv, err := devserver.Start(ctx, o.DevSrv)
	if err != nil {
		if errors.Is(err, devserver.ErrAddressInUse) {
			return nil, fmt.Errorf("%w; pick other ports with --dev-listen and --ui-listen, or point at the running server with --temporal-address", err)
		}
		return nil, fmt.Errorf("embedded Temporal server: %w", err)
	}
	o.Temporal.Address = srv.FrontendAddress()
	logger.Info("Started embedded Temporal server",
		zap.String("address", srv.FrontendAddress()),
		zap.String("ui", srv.UIURL()),
		zap.String("stateDir", o.DevSrv.StateDir))
	if srv.UIURL() != "" {
		fmt.Fprintf(os.Stdout, "Temporal UI: %s\n", srv.UIURL())
	}
	return srv, nil
}
