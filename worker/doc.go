// Command flotilla-worker runs Flotilla's Temporal worker.
//
// In the controller role (the default) it polls the Flotilla task queue for
// workflows and activities. Given no --temporal-address (or --dev) it first
// starts an embedded Temporal server with the Web UI, persisted under
// --state-dir, so one command gives a complete local stack:
//
//	flotilla-worker --dev --state-dir .flotilla
//
// Every flag can also be set from the environment as FLOTILLA_<FLAG>, with
// dashes turned into underscores: --log-level is FLOTILLA_LOG_LEVEL.
package main
