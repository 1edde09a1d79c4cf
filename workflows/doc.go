// Package workflows holds Flotilla's Temporal workflows: deterministic
// orchestration only. Workflow code here uses workflow.Now, workflow.Sleep,
// workflow.Go and workflow.NewSelector, never time, goroutines, channels,
// map iteration or I/O; everything that touches Git, Helm or Kubernetes runs
// in package activities.
//
// Each workflow takes one input struct and returns one result struct, and is
// registered under its function name, which internal/protocol spells out.
package workflows
