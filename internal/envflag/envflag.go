package envflag

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Name returns the environment variable for flag name under prefix:
// Name("FLOTILLA", "log-level") is "FLOTILLA_LOG_LEVEL".
func Name(prefix, flag string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Annotate appends "[$PREFIX_NAME]" to the usage of every flag in fs, so
// --help documents the environment variable next to the flag.
func Annotate(fs *pflag.FlagSet, prefix string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		f.Usage += " [$" + Name(prefix, f.Name) + "]"
	})
}

// Apply sets every flag of fs that was not given on the command line from
// its environment variable, when that variable is set (even to ""). Errors
// name the variable; the value is not repeated, as it may be a secret.
func Apply(fs *pflag.FlagSet, prefix string) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		env := Name(prefix, f.Name)
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value in $%s for --%s", env, f.Name))
		}
	})
	return errors.Join(errs...)
}
