// Package protocol names everything processes use to talk to Flotilla's
// workflows: workflow types and IDs, task queues, update, signal and query
// names, and the small records those carry. The CLI, the webhook receiver,
// activities and workflows share it, so a name is spelled once.
//
// It is pure (no I/O), so workflow code may import it.
package protocol
