//go:build !linux

package pulseserver

import "syscall"

// daemonAttr puts the daemon in its own process group, so that a Ctrl-C for the process
// that started it does not stop it before that process has cleaned up.
func daemonAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
