//go:build !linux

package testenv

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent-death signal, so
// elsewhere a killed test binary can leave its servers running.
func setParentDeathSignal(*syscall.SysProcAttr) {}
