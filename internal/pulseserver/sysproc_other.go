//go:build !linux

package pulsetest

import "syscall"

// daemonAttr puts the daemon in its own process group, so that a Ctrl-C for the test
// does not stop it before the test has cleaned up.
func daemonAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
