package main

import "fmt"

// exitError ends the CLI with code after the command printed what it had
// to say (main prints nothing more for it): `flotilla plan` exits 2 when
// the plan changes something.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
