// Package logging builds the one zap logger a Flotilla process uses, from
// the --log-level and --log-format flags.
package logging
