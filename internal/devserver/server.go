package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	"github.com/flotilla-gitops/flotilla/internal/devserver/serverconfig"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrAddressInUse is returned (wrapped) when a listen address is taken.
var ErrAddressInUse = errors.New("address already in use")

// Server is a running embedded Temporal server. Stop it with Stop.
type Server struct {
	opts     Options
	temporal temporal.Server
	ui       *uiserver.Server
	lock     *stateLock
	logLevel zap.AtomicLevel // of the Temporal server's own logger
	frontend string
	uiURL    string
}

// Start validates opts, prepares the state directory and starts the Temporal
// services and, unless opts.UIListen is empty, the Web UI. It returns once the
// frontend accepts connections, the namespace exists with its search
// attributes and the UI answers HTTP. Errors name the address or directory at
// fault; nothing is left running when Start fails.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	opts.ApplyDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	if s.lock, err = prepareStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	if s.frontend, err = reserve(opts.Listen, "Temporal frontend"); err != nil {
		return nil, err
	}
	if opts.UIListen != "" {
		uiAddr, err := reserve(opts.UIListen, "Temporal UI")
		if err != nil {
			return nil, err
		}
		s.uiURL = "http://" + uiAddr
	}

	sqlCfg := sqlConfig(filepath.Join(opts.StateDir, databaseFileName))
	if err := ensureSchema(sqlCfg); err != nil {
		return nil, err
	}
	if err := ensureNamespace(sqlCfg, opts); err != nil {
		return nil, err
	}
	if err := forgetMembership(sqlCfg); err != nil {
		return nil, err
	}
	if err := s.startTemporal(sqlCfg); err != nil {
		return nil, err
	}
	if err := waitMembership(ctx, s.frontend); err != nil {
		return nil, err
	}
	if err := ensureSearchAttributes(ctx, s.frontend, opts); err != nil {
		return nil, err
	}
	if s.uiURL != "" {
		if err := s.startUI(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// FrontendAddress is the host:port that SDK clients and workers dial.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIURL is the Web UI's base URL, or "" when the UI is disabled.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.opts.Namespace }

// Stop stops the UI and the Temporal services and releases the state
// directory. It is safe to call more than once and on a partly started server.
func (s *Server) Stop() {
	if s.ui != nil {
		s.ui.Stop()
		s.ui = nil
	}
	if s.temporal != nil {
		// Services shutting down one by one log connection errors about each
		// other; they say nothing about the user's work, so silence them.
		s.logLevel.SetLevel(zapcore.FatalLevel)
		if err := s.temporal.Stop(); err != nil {
			s.opts.Logger.Warn("Temporal server stopped with an error", zap.Error(err))
		}
		s.temporal = nil
	}
	if s.lock != nil {
		s.lock.release()
		s.lock = nil
	}
}

func (s *Server) startTemporal(sqlCfg *config.SQL) error {
	services, err := servicePorts(s.frontend)
	if err != nil {
		return err
	}
	cfg := serverConfig(s.frontend, services, sqlCfg)

	level, err := zapcore.ParseLevel(s.opts.ServerLogLevel)
	if err != nil {
		return fmt.Errorf("invalid server log level %q: %w", s.opts.ServerLogLevel, err)
	}
	s.logLevel = zap.NewAtomicLevelAt(level)
	serverLogger := s.opts.Logger.Named("temporal").WithOptions(zap.IncreaseLevel(s.logLevel))

	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(newServerLogger(serverLogger)),
		temporal.WithDynamicConfigClient(serverconfig.Dynamic()),
	)
	if err != nil {
		return fmt.Errorf("create Temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start Temporal server on %s: %w", s.frontend, err)
	}
	s.temporal = srv
	return nil
}

// servicePorts places the Temporal services: the frontend on the frontend
// address, the others on free ports of its host, each with a free
// membership port.
func servicePorts(frontend string) (map[string]config.Service, error) {
	host, portStr, _ := net.SplitHostPort(frontend)
	port, _ := strconv.Atoi(portStr)
	services := map[string]config.Service{"frontend": rpcService(host, port)}
	for _, name := range []string{"history", "matching", "worker"} {
		p, err := freePort(host)
		if err != nil {
			return nil, err
		}
		services[name] = rpcService(host, p)
	}
	for name, svc := range services {
		p, err := freePort(host)
		if err != nil {
			return nil, err
		}
		svc.RPC.MembershipPort = p
		services[name] = svc
	}
	return services, nil
}

// serverConfig is the configuration of a single-cluster server with SQLite
// persistence.
func serverConfig(frontend string, services map[string]config.Service, sqlCfg *config.SQL) *config.Config {
	return serverconfig.Single(frontend, services, config.Persistence{
		DefaultStore:     sqliteplugin.PluginName,
		VisibilityStore:  sqliteplugin.PluginName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
	})
}

func rpcService(host string, port int) config.Service {
	return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: host}}
}

func (s *Server) startUI(ctx context.Context) error {
	host, portStr, _ := net.SplitHostPort(s.uiURL[len("http://"):])
	port, _ := strconv.Atoi(portStr)
	cfg := &uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.frontend,
		EnableUI:            true,
		DefaultNamespace:    s.opts.Namespace,
		HideLogs:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		// The UI otherwise fetches a news feed from temporal.io on every
		// page load; a local dev stack talks to nothing but 127.0.0.1.
		DisableNewsFetch:   true,
		NotifyOnNewVersion: false,
	}
	if s.opts.CodecEndpoint != "" {
		cfg.Codec = uiconfig.Codec{
			Endpoint:            s.opts.CodecEndpoint,
			DefaultErrorMessage: "Could not decode payloads with the Flotilla worker's codec endpoint " + s.opts.CodecEndpoint,
		}
	}
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(cfg))
	go func() {
		// Start blocks until Stop. The port was checked free just before, so
		// the ui-server's fatal-on-listen-error path is not expected.
		if err := s.ui.Start(); err != nil {
			s.opts.Logger.Error("Temporal UI stopped", zap.Error(err))
		}
	}()
	return waitHTTP(ctx, s.uiURL, 15*time.Second)
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close() // only the status matters
			if resp.StatusCode < 500 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal UI at %s did not answer within %s", url, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sqlConfig is the SQLite data store: WAL journal and one shared connection,
// the only combination measured to be both fast and free of "database is
// locked" errors.
func sqlConfig(path string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		MaxConns:     1,
		MaxIdleConns: 1,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "normal",
		},
	}
}

// ensureSchema creates the database file on first start. The schema is
// written to a temporary file that is renamed into place, so a crash during
// set-up never leaves a half-initialised database behind.
func ensureSchema(cfg *config.SQL) error {
	path := cfg.DatabaseName
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stat Temporal database %s: %w", path, err)
	}
	tmp := path + ".init"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", f, err)
		}
	}
	tmpCfg := *cfg
	tmpCfg.DatabaseName = tmp
	tmpCfg.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "delete"}
	if err := sqlite.SetupSchema(&tmpCfg); err != nil {
		return fmt.Errorf("create Temporal database schema in %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("move Temporal database into place: %w", err)
	}
	return nil
}

// forgetMembership drops the service addresses a previous run recorded.
// Every start picks new internal ports, and stale rows make the services try
// to join a ring of dead peers (matching then never joins). The state-dir lock
// guarantees no live server uses this database, so every row is stale.
func forgetMembership(cfg *config.SQL) error {
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, cfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("open Temporal database %s: %w", cfg.DatabaseName, err)
	}
	defer func() { _ = db.Close() }() // read-write work is done by Exec
	if err := db.Exec("DELETE FROM cluster_membership"); err != nil {
		return fmt.Errorf("clear stale cluster membership in %s: %w", cfg.DatabaseName, err)
	}
	return nil
}

func ensureNamespace(cfg *config.SQL, opts Options) error {
	ns, err := sqlite.NewNamespaceConfig(serverconfig.ClusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", opts.Namespace, err)
	}
	if err := sqlite.CreateNamespaces(cfg, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", opts.Namespace, err)
	}
	return nil
}
