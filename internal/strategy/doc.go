// Package strategy turns a bundle's rollout strategy into a plan: which
// clusters roll out together (partitions), in what order, how many may be
// unavailable at once, when the rollout halts, and when partitions may
// start (windows).
//
// The package is pure: it does no I/O besides time.LoadLocation, which
// Windows calls to resolve time zones (from the embedded time/tzdata when
// the machine has no zoneinfo). Its results depend only on its arguments,
// never on map iteration order or on the order clusters are given in, so
// activities may compute them and workflows may record them. It is meant
// to be called from activities, not from workflow code.
//
// The plan follows Rancher Fleet's rollout strategy (fleet.yaml
// rolloutStrategy), with these deliberate differences, which keep a
// rollout from stalling and make every cluster take part:
//
//   - Every limit computed from a percentage rounds up, and maxUnavailable
//     (of the bundle or of a partition) is never below 1.
//   - A cluster belongs to the first manual partition that selects it
//     (Fleet puts it in every one), and clusters no manual partition
//     selects roll out last, in the partition "unpartitioned" (Fleet
//     leaves them out).
//   - autoPartitionThreshold is honoured (Fleet's controller ignores it
//     and always uses 200).
//
// failureThreshold, rollbackOnFailure, readyTimeoutSeconds, windows and a
// partition's requireApproval go beyond Fleet.
package strategy

// Register the IANA time zone database, so windows in any zone work on
// machines without zoneinfo.
import _ "time/tzdata"
