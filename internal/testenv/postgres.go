package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
)

const (
	// PostgresEnv names the environment variable that points StartPostgres
	// at a directory holding initdb, postgres and pg_isready (the Makefile
	// sets it from hack/postgres.sh).
	PostgresEnv = "FLOTILLA_POSTGRES"

	// postgresRoot is where Debian installs each major version's binaries,
	// as <version>/bin.
	postgresRoot = "/usr/lib/postgresql"
	// postgresUser is the superuser initdb creates, whatever the OS user.
	postgresUser = "postgres"
	// postgresOSUser runs PostgreSQL when the tests run as root, which
	// PostgreSQL refuses; Debian's postgresql package creates it.
	postgresOSUser = "postgres"
	// initdbTimeout bounds initdb, which takes a few seconds.
	initdbTimeout = 2 * time.Minute
	// postgresReadyTimeout bounds the wait for connections to be accepted.
	postgresReadyTimeout = time.Minute
	// postgresFastStop bounds the fast shutdown in t.Cleanup; StartProcess's
	// SIGTERM/SIGKILL follows if it is not done by then.
	postgresFastStop = 10 * time.Second
)

// postgresSettings tune PostgreSQL for throw-away test data: durability off
// (a crash of the machine may lose the database, which the test no longer
// needs), enough connections for a Temporal server's pools, little memory.
func postgresSettings() []string {
	return []string{
		"fsync=off",
		"synchronous_commit=off",
		"full_page_writes=off",
		"max_connections=200",
		"shared_buffers=32MB",
	}
}

// Postgres is a PostgreSQL server started by StartPostgres for one test.
// It accepts the superuser User without a password on Addr.
type Postgres struct {
	addr string
	proc *Process
}

// Addr returns the host:port clients connect to (127.0.0.1).
func (p *Postgres) Addr() string { return p.addr }

// User returns the superuser name, which needs no password.
func (p *Postgres) User() string { return postgresUser }

// LogPath returns the path of the server's log.
func (p *Postgres) LogPath() string { return p.proc.LogPath() }

// StartPostgres runs initdb into a new temporary directory and starts
// PostgreSQL on a free 127.0.0.1 port, with its unix socket inside that
// directory and durability turned off for speed (fsync, synchronous_commit
// and full_page_writes off). It returns once connections are accepted. A
// t.Cleanup stops the server with a fast shutdown and removes the
// directory.
//
// The binaries come from $FLOTILLA_POSTGRES or the newest
// /usr/lib/postgresql/<version>/bin; without either the test fails, telling
// the user to run `bash hack/postgres.sh`. When the test runs as root,
// PostgreSQL runs as the postgres OS user (it refuses to run as root), so
// the temporary directory's parents must be traversable by that user.
// StartPostgres skips the test in -short mode.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	if testing.Short() {
		t.Skip("testenv: skipping PostgreSQL in -short mode")
	}
	binDir, err := postgresBinDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	owner, err := postgresOwner()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	dir, err := postgresTempDir(owner)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // temp dir; leftovers are harmless

	dataDir := filepath.Join(dir, "data")
	if err := initdb(binDir, dataDir, owner); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	socketDir := filepath.Join(dir, "socket")
	if err := mkdirOwned(socketDir, owner); err != nil {
		t.Fatalf("testenv: %v", err)
	}

	port := FreePort(t)
	args := []string{"-D", dataDir, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", socketDir}
	for _, s := range postgresSettings() {
		args = append(args, "-c", s)
	}
	path, args := owner.wrap(filepath.Join(binDir, "postgres"), args)
	proc := StartProcess(t, ProcessOptions{Name: "postgres", Path: path, Args: args, Dir: dir})
	// Registered after StartProcess's cleanup, so it runs first: SIGINT is
	// PostgreSQL's fast shutdown (SIGTERM, which Stop sends, waits for
	// every client to disconnect).
	t.Cleanup(func() { fastStopPostgres(proc) })

	pg := &Postgres{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), proc: proc}
	ctx, cancel := context.WithTimeout(context.Background(), postgresReadyTimeout)
	defer cancel()
	isReady := filepath.Join(binDir, "pg_isready")
	if err := proc.WaitReady(ctx, func(ctx context.Context) error { return pgIsReady(ctx, isReady, port) }); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return pg
}

// postgresBinDir returns $FLOTILLA_POSTGRES or the newest
// /usr/lib/postgresql/<version>/bin, checked to hold the binaries
// StartPostgres runs.
func postgresBinDir() (string, error) {
	dir := os.Getenv(PostgresEnv)
	if dir == "" {
		dirs, _ := filepath.Glob(filepath.Join(postgresRoot, "*", "bin")) // the pattern is valid
		dir = newestVersionDir(dirs)
		if dir == "" {
			return "", fmt.Errorf("no PostgreSQL server in %s/<version>/bin: run `bash hack/postgres.sh` (it installs Debian's postgresql package) or set %s to a directory holding initdb and postgres", postgresRoot, PostgresEnv)
		}
	}
	for _, name := range []string{"initdb", "postgres", "pg_isready"} {
		if err := checkExecutable(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("PostgreSQL binaries in %s: %w (run `bash hack/postgres.sh`)", dir, err)
		}
	}
	return dir, nil
}

// newestVersionDir picks from .../<version>/bin directories the one with
// the highest version, ignoring names that are not versions.
func newestVersionDir(dirs []string) string {
	type candidate struct {
		dir     string
		version *semver.Version
	}
	var cs []candidate
	for _, d := range dirs {
		if v, err := semver.NewVersion(filepath.Base(filepath.Dir(d))); err == nil {
			cs = append(cs, candidate{d, v})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	return slices.MaxFunc(cs, func(a, b candidate) int { return a.version.Compare(b.version) }).dir
}

// osUser is who runs PostgreSQL: the test process's own user (zero value)
// or, when that is root, the postgres OS user.
type osUser struct {
	name     string
	uid, gid int
	setpriv  string // path of setpriv(1), which switches to uid and gid
}

func (u osUser) other() bool { return u.name != "" }

// postgresOwner returns who runs PostgreSQL.
func postgresOwner() (osUser, error) {
	if os.Geteuid() != 0 {
		return osUser{}, nil
	}
	u, err := user.Lookup(postgresOSUser)
	if err != nil {
		return osUser{}, fmt.Errorf("running as root, but PostgreSQL refuses to run as root and there is no %q user to run it as (Debian's postgresql package creates it: run `bash hack/postgres.sh`): %w", postgresOSUser, err)
	}
	uid, errU := strconv.Atoi(u.Uid)
	gid, errG := strconv.Atoi(u.Gid)
	if err := errors.Join(errU, errG); err != nil {
		return osUser{}, fmt.Errorf("user %s: %w", postgresOSUser, err)
	}
	// StartProcess owns the child's SysProcAttr, so the switch of user is
	// made by setpriv (util-linux, always on Debian), which execs
	// PostgreSQL in place: same PID, same process group. Changing user
	// clears the parent-death signal, so setpriv sets it again.
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return osUser{}, fmt.Errorf("running as root needs setpriv (util-linux) to run PostgreSQL as %s: %w", postgresOSUser, err)
	}
	return osUser{name: postgresOSUser, uid: uid, gid: gid, setpriv: setpriv}, nil
}

// wrap returns the command line that runs path with args as u.
func (u osUser) wrap(path string, args []string) (string, []string) {
	if !u.other() {
		return path, args
	}
	prefix := []string{
		"--reuid=" + strconv.Itoa(u.uid),
		"--regid=" + strconv.Itoa(u.gid),
		"--clear-groups",
		"--pdeathsig=SIGKILL",
		"--",
		path,
	}
	return u.setpriv, append(prefix, args...)
}

// postgresTempDir creates the directory that holds the data directory, the
// socket and the log, owned by u.
func postgresTempDir(u osUser) (string, error) {
	dir, err := os.MkdirTemp("", "flotilla-postgres-")
	if err != nil {
		return "", fmt.Errorf("create PostgreSQL temp dir: %w", err)
	}
	if !u.other() {
		return dir, nil
	}
	if err := checkTraversable(filepath.Dir(dir), u); err != nil {
		_ = os.RemoveAll(dir) // just created and empty
		return "", err
	}
	if err := os.Chown(dir, u.uid, u.gid); err != nil {
		_ = os.RemoveAll(dir) // just created and empty
		return "", fmt.Errorf("hand PostgreSQL temp dir %s to user %s: %w", dir, u.name, err)
	}
	return dir, nil
}

// checkTraversable reports an error naming the first directory from dir up
// to / that u cannot enter.
func checkTraversable(dir string, u osUser) error {
	for d := dir; ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("check PostgreSQL temp dir parent: %w", err)
		}
		if !canEnter(info, u) {
			return fmt.Errorf("user %s, which runs PostgreSQL, cannot enter %s (mode %s): set TMPDIR to a directory every user can traverse, e.g. /tmp", u.name, d, info.Mode().Perm())
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// canEnter reports whether u may search the directory described by info,
// by its owner, group or other execute bit.
func canEnter(info os.FileInfo, u osUser) bool {
	mode := info.Mode().Perm()
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case ok && int(st.Uid) == u.uid:
		return mode&0o100 != 0
	case ok && int(st.Gid) == u.gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

func mkdirOwned(dir string, u osUser) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if u.other() {
		if err := os.Chown(dir, u.uid, u.gid); err != nil {
			return fmt.Errorf("hand %s to user %s: %w", dir, u.name, err)
		}
	}
	return nil
}

// initdb creates a cluster in dataDir: superuser postgres, trust
// authentication, UTF8 without a locale, no fsync (test data).
func initdb(binDir, dataDir string, u osUser) error {
	ctx, cancel := context.WithTimeout(context.Background(), initdbTimeout)
	defer cancel()
	path, args := u.wrap(filepath.Join(binDir, "initdb"), []string{
		"-D", dataDir,
		"--username=" + postgresUser,
		"--auth=trust",
		"--encoding=UTF8",
		"--no-locale",
		"--no-sync",
		"--no-instructions",
	})
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = filepath.Dir(dataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", dataDir, err, lastLines(string(out), logTailLines))
	}
	return nil
}

// pgIsReady reports whether PostgreSQL on 127.0.0.1:port accepts
// connections, using pg_isready (exit status 0).
func pgIsReady(ctx context.Context, pgIsReadyPath string, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgIsReadyPath,
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", postgresUser, "-d", "postgres", "-t", "2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_isready: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// fastStopPostgres asks PostgreSQL for a fast shutdown (roll back open
// transactions, disconnect clients) and waits for it to exit.
func fastStopPostgres(p *Process) {
	select {
	case <-p.Done():
		return
	default:
	}
	_ = syscall.Kill(p.PID(), syscall.SIGINT) // ESRCH if it exited meanwhile
	select {
	case <-p.Done():
	case <-time.After(postgresFastStop):
	}
}
