package activities

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// Contact probing: a watch asks its cluster's API server for /version
// every 10 s (a thousand clusters cost a controller 100 small requests a
// second); after 2 failed probes in a row (2 s apart) it tells the
// cluster's workflow the cluster is unreachable, and after 2 good ones in
// a row that it is back. An API server that stops answering is reported
// within about 12 s plus the probes' own timeouts (5 s each): under 30 s.
var defaultContactProbe = contactProbe{every: 10 * time.Second, retry: 2 * time.Second, failures: 2, successes: 2}

// contactProbe is how a watch probes its API server: every so often, a
// retry apart while the answer changes; failures failed probes in a row
// lose contact, successes good ones in a row regain it (a server that
// answers now and then does not flap).
type contactProbe struct {
	every, retry        time.Duration
	failures, successes int
}

// maxContactReason bounds the probe error kept in workflow state.
const maxContactReason = 300

// prober is what probeContact needs of a cluster connection.
type prober interface {
	Name() string
	Reachable(ctx context.Context) error
}

// probeContact runs until ctx ends, telling the cluster's workflow
// (protocol.SignalContact) when the watch loses and regains contact with
// the API server. It starts from what the workflow believes
// (unreachable), so a steady cluster costs no signal.
func (c *ClusterActivities) probeContact(ctx context.Context, p contactProbe, k prober, unreachable bool, token string) {
	var last time.Time
	failures, successes := 0, 0
	for {
		err := k.Reachable(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		var tell *protocol.Contact
		if err == nil {
			last, failures, successes = now, 0, successes+1
			if unreachable && successes >= p.successes {
				tell = &protocol.Contact{Reachable: true, LastContact: now, Watch: token}
			}
		} else {
			failures, successes = failures+1, 0
			if !unreachable && failures >= p.failures {
				tell = &protocol.Contact{LastContact: last, Reason: truncate(err.Error(), maxContactReason), Watch: token}
			}
		}
		if tell != nil {
			if serr := c.Signal(ctx, protocol.ClusterID(k.Name()), protocol.SignalContact, *tell); serr != nil {
				c.Logger.Warn("Cannot report the cluster's contact; retrying", zap.String("cluster", k.Name()), zap.Error(serr))
			} else {
				unreachable = !tell.Reachable
			}
		}
		wait := p.every
		if failures > 0 && !unreachable || successes > 0 && unreachable {
			wait = p.retry // the answer changed: confirm it soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
