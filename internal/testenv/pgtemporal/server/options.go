package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/internal/freeport"
	"github.com/flotilla-gitops/flotilla/internal/logging"
)

// serviceNames are the Temporal services this process runs, frontend first.
var serviceNames = []string{"frontend", "history", "matching", "worker"}

// servicePorts are one service's gRPC and membership (ringpop) ports.
type servicePorts struct {
	grpc       int
	membership int
}

// options are the command-line flags.
type options struct {
	postgres     string // host:port
	user         string
	password     string
	database     string
	visibilityDB string
	maxConns     int

	frontend  string // host:port; the frontend's gRPC port is ports["frontend"].grpc after resolve
	ports     map[string]*servicePorts
	shards    int32
	namespace string
	retention time.Duration
	Log       logging.Options
}

func (o *options) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.postgres, "postgres", "127.0.0.1:5432", "PostgreSQL host:port")
	fs.StringVar(&o.user, "postgres-user", "postgres", "PostgreSQL user; it must be allowed to create databases")
	fs.StringVar(&o.password, "postgres-password", "", "PostgreSQL password (none for trust authentication)")
	fs.StringVar(&o.database, "database", "temporal", "database for Temporal's persistence (created if missing)")
	fs.StringVar(&o.visibilityDB, "visibility-database", "temporal_visibility", "database for Temporal's visibility (created if missing)")
	fs.IntVar(&o.maxConns, "max-conns", 10, "connections per database pool; each of the 4 services has one pool per database")
	fs.StringVar(&o.frontend, "frontend", "127.0.0.1:7233", "frontend gRPC host:port that clients dial; the other services bind the same host")
	o.ports = map[string]*servicePorts{}
	for _, name := range serviceNames {
		p := &servicePorts{}
		o.ports[name] = p
		if name != "frontend" {
			fs.IntVar(&p.grpc, name+"-port", 0, name+" service gRPC port (0: a free port)")
		}
		fs.IntVar(&p.membership, name+"-membership-port", 0, name+" service membership port (0: a free port)")
	}
	fs.Int32Var(&o.shards, "history-shards", 4, "number of history shards; fixed when the database is first set up")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace registered, with Flotilla's search attributes, if missing")
	fs.DurationVar(&o.retention, "retention", 24*time.Hour, "workflow retention of the namespace when it is registered")
	o.Log.BindFlags(fs)
}

// resolve validates the flags and gives every port left at 0 a free port.
func (o *options) resolve() error {
	host, port, err := splitHostPort(o.frontend)
	if err != nil {
		return fmt.Errorf("invalid --frontend: %w", err)
	}
	if port == 0 {
		return errors.New("invalid --frontend: the port must be given, clients need to know it")
	}
	if _, _, err := splitHostPort(o.postgres); err != nil {
		return fmt.Errorf("invalid --postgres: %w", err)
	}
	if o.shards < 1 {
		return fmt.Errorf("invalid --history-shards %d: want at least 1", o.shards)
	}
	o.ports["frontend"].grpc = port

	var unset []*int
	for _, name := range serviceNames {
		p := o.ports[name]
		for _, v := range []*int{&p.grpc, &p.membership} {
			if *v == 0 {
				unset = append(unset, v)
			}
		}
	}
	if len(unset) == 0 {
		return nil
	}
	free, err := freeport.Pick(host, len(unset))
	if err != nil {
		return err
	}
	for i, v := range unset {
		*v = free[i]
	}
	return nil
}

// host is the address every service binds and advertises.
func (o *options) host() string {
	host, _, _ := net.SplitHostPort(o.frontend) // checked by resolve
	return host
}

func splitHostPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q has no valid port", addr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q has no host", addr)
	}
	return host, port, nil
}
