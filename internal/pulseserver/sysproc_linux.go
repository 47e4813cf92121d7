package pulsetest

import "syscall"

// daemonAttr puts the daemon in its own process group (a Ctrl-C for the test must not
// stop it before the test has cleaned up) and has the kernel stop it if the test
// process dies without cleaning up (a panic, a timeout), so that no daemon outlives it.
func daemonAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
