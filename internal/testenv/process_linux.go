package testenv

import "syscall"

// setParentDeathSignal asks the kernel to SIGKILL the child when the test
// binary dies, e.g. after a `go test -timeout` panic that skips t.Cleanup.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
