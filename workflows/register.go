package workflows

import "go.temporal.io/sdk/worker"

// Register registers every Flotilla workflow on w under its constant name.
func Register(w worker.Registry) {
	_ = w
}
