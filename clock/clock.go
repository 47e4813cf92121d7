// Package clock gives everything that waits or timestamps one source of time: the real
// clock in live use, and a virtual clock for tests and fast, deterministic replays.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer fires once on C after its duration has passed on its clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports false if the timer already fired.
	Stop() bool
}

// Scheduler is implemented by clocks whose time advances only while all tracked work is
// idle (Virtual). The iu runtime counts its goroutines and in-flight events with Begin
// and End, so that virtual time moves only when every module is waiting.
type Scheduler interface {
	Clock
	// Begin records one more unit of tracked work: a running goroutine or an event in flight.
	Begin()
	// End records that one unit of tracked work finished.
	End()
	// NewWakeTimer is NewTimer whose firing is itself a unit of tracked work, taken over
	// by whoever receives from C (or ended by Stop when it already fired). Timers due at
	// the same instant fire one at a time, each once the work the previous one started
	// has ended, highest rank first (the iu runtime ranks modules in the order they were
	// added, so a module downstream handles its deadline before the news its upstream
	// makes at the same instant): what they wake then runs in the same order on every
	// run.
	NewWakeTimer(d time.Duration, rank int) Timer
	// Settle lets the caller, a running unit of tracked work, wait for the end of the
	// instant: it gives up its unit until every other one has ended and no timer is due
	// now, then takes it back and returns. Callers settling together go on one at a
	// time, lowest rank first, then lowest order (callers of one rank that may settle at
	// once tell their order with it; equal ones go first come, first served), each once
	// the work the previous one started has ended. So a result computed on a worker
	// reaches its module at the same point of the instant whatever the real time the
	// computation took. When ctx ends first it returns ctx.Err(), and the caller holds
	// its unit again.
	Settle(ctx context.Context, rank int, order uint64) error
}

// Sleep waits for d on c, or until ctx is done.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now, which carries Go's monotonic reading.
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a timer backed by time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
