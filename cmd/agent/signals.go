package main

import (
	"os"
	"syscall"
	"time"
)

// signalAction is what main does with a SIGINT or SIGTERM.
type signalAction int

const (
	// toHandler gives a Ctrl-C to the command that took it (chat stops the reply).
	toHandler signalAction = iota
	// stopGracefully ends the command's context: it finishes what it holds and saves.
	stopGracefully
	// exitNow ends the process at once (exit status 128 + the signal's number).
	exitNow
)

// doubleTap is how soon a Ctrl-C after one the command took counts as a stop request.
const doubleTap = time.Second

// signalPolicy decides what each signal does. The first stop request (Ctrl-C, SIGTERM)
// starts a graceful stop; any signal after it ends the process at once, because a command
// that has not stopped by then may be stuck where no context reaches (an open() that
// waits, a long C call). A Ctrl-C that the command takes for itself is not a stop request,
// unless it comes within doubleTap of the previous one: then the user means to stop.
// It is pure; main's signal goroutine owns the value.
type signalPolicy struct {
	stopping    bool
	lastHandled time.Time
}

func (p *signalPolicy) decide(sig os.Signal, now time.Time, hasHandler bool) signalAction {
	if p.stopping {
		return exitNow
	}
	if sig == os.Interrupt && hasHandler && (p.lastHandled.IsZero() || now.Sub(p.lastHandled) >= doubleTap) {
		p.lastHandled = now
		return toHandler
	}
	p.stopping = true
	return stopGracefully
}

// signalExitCode is the shell's exit status for a process ended by sig: 130 for SIGINT,
// 143 for SIGTERM.
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
