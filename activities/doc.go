// Package activities holds Flotilla's Temporal activities: thin adapters that
// validate their input, call the logic in internal/, translate errors into
// Temporal's vocabulary (non-retryable for bad input) and heartbeat when
// they run long. No rollout decisions are made here.
package activities
