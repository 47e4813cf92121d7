package pulseserver

import "syscall"

// daemonAttr puts the daemon in its own process group (a Ctrl-C for the process that
// started it, a test or the bench, must not stop it before that process has cleaned up)
// and has the kernel stop it if that process dies without cleaning up (a panic, a
// timeout), so that no daemon outlives it.
func daemonAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
