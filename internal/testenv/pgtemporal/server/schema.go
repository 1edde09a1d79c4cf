package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/lib/pq"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/common/resolver"
	dbschemas "go.temporal.io/server/schema"
	"go.uber.org/zap"
)

// Embedded schema directories (of go.temporal.io/server/schema) of the two
// databases: temporal-sql-tool's --schema-name values.
const (
	persistenceSchema = "postgresql/v12/temporal"
	visibilitySchema  = "postgresql/v12/visibility"
)

// ensureSchemas retries creating a database every connectRetryInterval for
// up to connectWait, so the server may start alongside a PostgreSQL that does
// not accept connections yet.
const (
	connectRetryInterval = 200 * time.Millisecond
	connectWait          = 15 * time.Second
)

// sqlConfig is the data store of one database.
func sqlConfig(o options, database string) *config.SQL {
	return &config.SQL{
		PluginName:      postgresql.PluginName,
		ConnectAddr:     o.postgres,
		ConnectProtocol: "tcp",
		User:            o.user,
		Password:        o.password,
		DatabaseName:    database,
		MaxConns:        o.maxConns,
		MaxIdleConns:    o.maxConns,
		MaxConnLifetime: time.Hour,
	}
}

// ensureSchemas creates both databases if missing and brings their schemas
// to the version this server build embeds. Every step is idempotent, so it
// runs on every start.
//
// It follows temporal-sql-tool's procedure (create-database, setup-schema
// -v 0.0, update-schema --schema-name …) with the same schema files, version
// tables and plugin calls, but not through go.temporal.io/server/tools/sql:
// that package needs github.com/urfave/cli, which this module does not
// require, and its sql.RunTool calls os.Exit(1) on any error (or drops it
// with --quiet), so errors could be neither wrapped nor retried.
func ensureSchemas(ctx context.Context, o options, logger *zap.Logger) error {
	toolLogger := log.NewZapLogger(logger.Named("schema"))
	for _, db := range []struct{ name, schema string }{
		{o.database, persistenceSchema},
		{o.visibilityDB, visibilitySchema},
	} {
		cfg := sqlConfig(o, db.name)
		if err := retryConnect(ctx, func() error { return createDatabase(cfg, toolLogger) }); err != nil {
			return fmt.Errorf("create database %s on %s: %w", db.name, o.postgres, err)
		}
		if err := migrate(cfg, db.schema, toolLogger); err != nil {
			return fmt.Errorf("set up schema %s in database %s on %s: %w", db.schema, db.name, o.postgres, err)
		}
	}
	return nil
}

func openAdminDB(cfg *config.SQL, logger log.Logger) (sqlplugin.AdminDB, error) {
	db, err := persistencesql.NewSQLAdminDB(sqlplugin.DbKindUnknown, cfg, resolver.NewNoopResolver(), logger, metrics.NoopMetricsHandler)
	if err != nil {
		return nil, fmt.Errorf("connect to database %q: %w", cfg.DatabaseName, err)
	}
	return db, nil
}

// createDatabase creates cfg.DatabaseName, connected to PostgreSQL's
// default database. The postgres plugin treats "already exists" as success.
func createDatabase(cfg *config.SQL, logger log.Logger) error {
	admin := *cfg
	admin.DatabaseName = "" // the plugin then tries the default databases
	admin.MaxConns, admin.MaxIdleConns = 1, 1
	db, err := openAdminDB(&admin, logger)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // nothing left to flush
	return db.CreateDatabase(cfg.DatabaseName)
}

// versionedUpdate is one directory v<version> under <schema>/versioned.
type versionedUpdate struct {
	version *semver.Version
	dir     string
}

// manifest is a versioned directory's manifest.json.
type manifest struct {
	CurrVersion          string
	MinCompatibleVersion string
	Description          string
	SchemaUpdateCqlFiles []string
	AllowNoCqlFiles      bool
}

// migrate creates the version tables if missing and applies, in order,
// every embedded versioned update newer than the database's version,
// recording each in schema_version and schema_update_history.
func migrate(cfg *config.SQL, schemaName string, logger log.Logger) error {
	assets := dbschemas.Assets()
	updates, err := listUpdates(assets, schemaName)
	if err != nil {
		return err
	}
	admin := *cfg
	admin.MaxConns, admin.MaxIdleConns = 1, 1
	db, err := openAdminDB(&admin, logger)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // every write was committed by Exec
	if err := db.CreateSchemaVersionTables(); err != nil {
		return fmt.Errorf("create schema version tables: %w", err)
	}
	current, err := db.ReadSchemaVersion(cfg.DatabaseName)
	if errors.Is(err, sql.ErrNoRows) {
		current = "0.0"
	} else if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	currentVer, err := semver.NewVersion(current)
	if err != nil {
		return fmt.Errorf("database records schema version %q: %w", current, err)
	}
	for _, u := range updates {
		if !u.version.GreaterThan(currentVer) {
			continue
		}
		if err := applyUpdate(db, assets, u, current, cfg.DatabaseName); err != nil {
			return err
		}
		current, currentVer = u.version.Original(), u.version
	}
	return nil
}

// listUpdates returns the versioned updates of schemaName, oldest first.
func listUpdates(assets fs.FS, schemaName string) ([]versionedUpdate, error) {
	dir := path.Join(schemaName, "versioned")
	entries, err := fs.ReadDir(assets, dir)
	if err != nil {
		return nil, fmt.Errorf("schema %s is not embedded in this Temporal server build: %w", schemaName, err)
	}
	var updates []versionedUpdate
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") {
			continue
		}
		v, err := semver.NewVersion(strings.TrimPrefix(e.Name(), "v"))
		if err != nil {
			return nil, fmt.Errorf("versioned schema directory %s/%s: %w", dir, e.Name(), err)
		}
		updates = append(updates, versionedUpdate{version: v, dir: path.Join(dir, e.Name())})
	}
	if len(updates) == 0 {
		return nil, fmt.Errorf("no versioned schema directories in %s", dir)
	}
	slices.SortFunc(updates, func(a, b versionedUpdate) int { return a.version.Compare(b.version) })
	return updates, nil
}

// applyUpdate runs one versioned update and records it. Statements that
// fail because their object already exists (or is already gone) are
// skipped: an earlier start may have stopped half-way through this update,
// and PostgreSQL cannot run some of them (CREATE INDEX CONCURRENTLY) in a
// transaction that would have made it all-or-nothing.
func applyUpdate(db sqlplugin.AdminDB, assets fs.FS, u versionedUpdate, from, dbName string) error {
	raw, err := fs.ReadFile(assets, path.Join(u.dir, "manifest.json"))
	if err != nil {
		return fmt.Errorf("read manifest of %s: %w", u.dir, err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("parse manifest of %s: %w", u.dir, err)
	}
	if v, err := semver.NewVersion(m.CurrVersion); err != nil || !v.Equal(u.version) {
		return fmt.Errorf("manifest of %s names version %q", u.dir, m.CurrVersion)
	}
	if len(m.SchemaUpdateCqlFiles) == 0 && !m.AllowNoCqlFiles {
		return fmt.Errorf("manifest of %s lists no schema files", u.dir)
	}
	for _, file := range m.SchemaUpdateCqlFiles {
		if err := execFile(db, assets, path.Join(u.dir, file)); err != nil {
			return err
		}
	}
	version := u.version.Original()
	if err := db.UpdateSchemaVersion(dbName, version, m.MinCompatibleVersion); err != nil {
		return fmt.Errorf("record schema version %s of database %s: %w", version, dbName, err)
	}
	// The update log records the manifest's MD5, as temporal-sql-tool
	// does; it identifies the file, it protects nothing.
	sum := md5.Sum(raw)
	if err := db.WriteSchemaUpdateLog(from, version, hex.EncodeToString(sum[:]), m.Description); err != nil {
		return fmt.Errorf("record schema update %s → %s of database %s: %w", from, version, dbName, err)
	}
	return nil
}

// execFile runs every statement of one schema file.
func execFile(db sqlplugin.AdminDB, assets fs.FS, file string) error {
	data, err := fs.ReadFile(assets, file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	stmts, err := persistence.LoadAndSplitQueryFromReaders([]io.Reader{bytes.NewReader(data)})
	if err != nil {
		return fmt.Errorf("split %s into statements: %w", file, err)
	}
	for i, stmt := range stmts {
		if err := db.Exec(stmt); err != nil && !alreadyApplied(err) {
			return fmt.Errorf("statement %d of %s: %w", i+1, file, err)
		}
	}
	return nil
}

// alreadyApplied reports whether err says a statement's work is already
// done: its object exists, or the object it drops or alters away is gone.
func alreadyApplied(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	switch pqErr.Code {
	case "42P07", // duplicate_table (also indexes)
		"42701", // duplicate_column
		"42710", // duplicate_object
		"42P06", // duplicate_schema
		"42723", // duplicate_function
		"42P01", // undefined_table
		"42703", // undefined_column
		"42704": // undefined_object
		return true
	}
	return false
}

// retryConnect calls fn until it succeeds, connectWait has passed or ctx
// ends. It returns fn's last error.
func retryConnect(ctx context.Context, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(connectRetryInterval):
		}
	}
}
