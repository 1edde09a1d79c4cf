// Package envflag lets every command-line flag be set from the environment:
// flag --temporal-address is also FLOTILLA_TEMPORAL_ADDRESS. A flag given on
// the command line wins over the environment, which wins over the default.
package envflag
