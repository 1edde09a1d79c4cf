//go:build unix

package deployer

import (
	"errors"
	"syscall"
)

// processExists reports whether a process with ID pid exists: signal 0
// checks without sending anything. EPERM means it exists but is not ours.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
