package deployer

import (
	"context"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Awaited is one release WaitAll waits for.
type Awaited struct {
	// Namespace and Name name the release.
	Namespace, Name string
	// DeploymentID, when set, is the deployment ID the release must run to
	// count as ready. Optional: default any.
	DeploymentID string
	// Ready tunes how its objects are judged.
	Ready ReadyOptions
}

// Observed is what one round of WaitAll saw of one release.
type Observed struct {
	// Status is the release's status; zero when Err is set.
	Status Status
	// Err is the error of reading the status (or of getting the getter);
	// the release then counts as not ready.
	Err error
}

// ready reports whether o shows the release running id (any when empty)
// with every object ready.
func (o Observed) ready(id string) bool {
	return o.Err == nil && (id == "" || o.Status.DeploymentID == id) && o.Status.AllReady()
}

// WaitOptions tune WaitAll.
type WaitOptions struct {
	// Interval is the pause between rounds.
	// Optional: default DefaultPollInterval.
	Interval time.Duration
	// Deadline ends the wait after the first round that ends past it.
	// Optional: default none (the wait ends with ctx).
	Deadline time.Time
	// Progress, if not nil, is called after every round with what it saw
	// (an activity heartbeats there).
	Progress func([]Observed)
}

// WaitAll reads the Status of every release (through getter, called with
// each release's namespace every round) until every one runs its
// DeploymentID with all objects ready, ctx ends, or a round ends past
// opts.Deadline. It returns what the last round saw, in the order of
// releases; errors do not end the wait, they are reported per release.
// It always makes at least one round and never modifies anything.
func (d *Deployer) WaitAll(ctx context.Context, getter func(namespace string) (genericclioptions.RESTClientGetter, error),
	releases []Awaited, opts WaitOptions) []Observed {
	if opts.Interval <= 0 {
		opts.Interval = DefaultPollInterval
	}
	for {
		seen := make([]Observed, len(releases))
		ready := true
		for i, r := range releases {
			seen[i] = d.observe(ctx, getter, r)
			ready = ready && seen[i].ready(r.DeploymentID)
		}
		if opts.Progress != nil {
			opts.Progress(seen)
		}
		if ready || ctx.Err() != nil || (!opts.Deadline.IsZero() && time.Now().After(opts.Deadline)) {
			return seen
		}
		select {
		case <-ctx.Done():
			return seen
		case <-time.After(opts.Interval):
		}
	}
}

// observe reads one release's status for WaitAll.
func (d *Deployer) observe(ctx context.Context, getter func(namespace string) (genericclioptions.RESTClientGetter, error),
	r Awaited) Observed {
	g, err := getter(r.Namespace)
	if err != nil {
		return Observed{Err: err}
	}
	st, err := d.Status(ctx, g, r.Namespace, r.Name, r.Ready)
	if err != nil {
		return Observed{Err: err}
	}
	return Observed{Status: st}
}
