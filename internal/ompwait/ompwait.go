// Package ompwait makes the OpenMP threads of Debian's ggml wait passively (sleep) instead
// of spinning, in a Go program that links libllama or libwhisper.
//
// libggml-base needs libgomp, so libgomp is loaded, and reads OMP_WAIT_POLICY and
// GOMP_SPINCOUNT, before the Go runtime starts: os.Setenv in main, or a C constructor in
// the program, comes too late, and libgomp has no call to change the policy afterwards.
// By default its idle threads spin 300,000 times before sleeping, which on a 2-core machine
// takes the CPU from the Go runtime, the other engines and the audio path. So the only
// way in is the environment the process starts with: Reexec runs the program again with
// OMP_WAIT_POLICY=passive when neither variable is set.
//
// The package is pure Go and links no native library.
package ompwait

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Policy is the wait policy Reexec asks for.
const Policy = "passive"

// Variables are the environment variables through which libgomp takes its wait policy;
// when either is set, the user chose and Reexec leaves the environment alone.
var Variables = [...]string{"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}

// Environ returns env with OMP_WAIT_POLICY=passive added, and whether that was needed (no
// variable of Variables present, even empty: an empty one is still a choice made before
// start).
func Environ(env []string) ([]string, bool) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		for _, v := range Variables {
			if name == v {
				return env, false
			}
		}
	}
	out := make([]string, 0, len(env)+1)
	out = append(out, env...)
	return append(out, "OMP_WAIT_POLICY="+Policy), true
}

// Reexec replaces the process with a fresh run of the same executable and arguments, with
// OMP_WAIT_POLICY=passive in its environment, unless the environment already names a wait
// policy. Call it first thing in main (before any goroutine or file matters). It returns
// nil when nothing needed doing; on success it does not return; an error means the process
// goes on with spinning OpenMP threads (log it and continue).
func Reexec() error {
	env, needed := Environ(os.Environ())
	if !needed {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("ompwait: finding the executable to re-run with OMP_WAIT_POLICY=%s: %w", Policy, err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("ompwait: re-running %s with OMP_WAIT_POLICY=%s: %w", exe, Policy, err)
	}
	return nil
}
