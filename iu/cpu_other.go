//go:build !linux

package iu

import "time"

// threadCPU cannot read a thread's CPU time on this system.
func threadCPU() (time.Duration, bool) { return 0, false }
