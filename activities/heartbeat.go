package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeatEvery is how often keepAlive heartbeats; the workflows' heartbeat
// timeouts are a few multiples of it, so a worker killed mid-activity is
// noticed within seconds and the activity retried elsewhere.
const heartbeatEvery = 2 * time.Second

// keepAlive heartbeats in the background until the returned stop is
// called, so one long Helm call cannot exceed the heartbeat timeout.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
