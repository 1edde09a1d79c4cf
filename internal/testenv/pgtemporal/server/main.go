// Command server runs a production-shaped Temporal server on PostgreSQL as
// a process of its own, for tests that stop, kill and restart it (see
// testenv.BuildTemporalServer and testenv.StartTemporalServer).
//
// On every start it creates the persistence and visibility databases if
// they are missing and brings their schemas up to the version this server
// build expects, from the schema files embedded in go.temporal.io/server
// (see ensureSchemas); on databases that are up to date this is a no-op. It
// then runs the frontend, history, matching and worker services in this
// process, registers the namespace and Flotilla's custom search attributes
// if they are missing, and prints
//
//	Temporal server ready <frontend host:port>
//
// on stdout. SIGTERM or SIGINT stops it gracefully.
//
//	server --postgres 127.0.0.1:5432 --postgres-user postgres \
//	  --frontend 127.0.0.1:7233 --history-port 7234 --matching-port 7235 \
//	  --worker-port 7236 --frontend-membership-port 7237 ...
//
// A port flag left at 0 gets a free port on every start. Pass them all to
// restart on the same ports: the services find their peers through the
// addresses the last run recorded in the database, and a restart on new
// ports waits (about 40 s) for the old ones to expire.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
)

// readyMessage starts the line printed on stdout once clients can use the
// server; the frontend address follows it. testenv.StartTemporalServer
// waits for this line.
const readyMessage = "Temporal server ready"

// startTimeout bounds everything between the first database connection and
// the ready line.
const startTimeout = 2 * time.Minute

func main() {
	var o options
	fs := pflag.NewFlagSet(os.Args[0], pflag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "temporal-postgres: "+err.Error())
		os.Exit(1)
	}
}

func run(o options) error {
	if err := o.resolve(); err != nil {
		return err
	}
	logger, err := o.Log.New()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }() // stderr sync errors are not actionable

	// Signals before the services run abort the start; once they run, a
	// signal waits for them to have joined, because stopping a service that
	// is still joining the membership ring panics inside the server.
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	setupCtx, cancel := context.WithTimeout(sig, startTimeout)
	defer cancel()
	begin := time.Now()
	if err := ensureSchemas(setupCtx, o, logger); err != nil {
		if sig.Err() != nil {
			return nil // asked to stop while setting up: a clean exit
		}
		return err
	}
	schemaDone := time.Since(begin)

	srv, err := startServer(o, logger)
	if err != nil {
		return err
	}
	defer func() {
		logger.Info("Stopping Temporal server")
		if err := srv.Stop(); err != nil {
			logger.Warn("Temporal server stopped with an error", zap.Error(err))
		}
	}()

	readyCtx, cancelReady := context.WithTimeout(context.Background(), startTimeout)
	defer cancelReady()
	if err := waitServing(readyCtx, o.frontend); err != nil {
		return err
	}
	if err := ensureNamespace(readyCtx, o, logger); err != nil {
		return err
	}
	logger.Info("Temporal server started",
		zap.String("frontend", o.frontend),
		zap.Duration("schema", schemaDone),
		zap.Duration("total", time.Since(begin)))
	fmt.Printf("%s %s\n", readyMessage, o.frontend)

	<-sig.Done()
	return nil
}
