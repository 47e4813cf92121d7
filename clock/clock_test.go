package clock

import (
	"context"
	"testing"
	"time"
)

func TestVirtualSleepJumpsWhenIdle(t *testing.T) {
	start := time.Unix(0, 0)
	v := NewVirtual(start)
	defer v.Close()
	began := time.Now()
	// Nothing tracked is running, so time jumps straight to the deadline.
	if err := Sleep(context.Background(), v, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := v.Now().Sub(start); got != time.Hour {
		t.Fatalf("virtual time after sleeping an hour: %v", got)
	}
	if time.Since(began) > time.Second {
		t.Fatal("a virtual hour took more than a real second")
	}
}

func TestVirtualHoldsTimeWhileWorkRuns(t *testing.T) {
	start := time.Unix(0, 0)
	v := NewVirtual(start)
	defer v.Close()
	v.Begin() // some tracked work is running
	timer := v.NewTimer(time.Second)
	expectStill(t, timer, "timer fired while tracked work was running")
	v.End()
	<-timer.C()
	if got := v.Now().Sub(start); got != time.Second {
		t.Fatalf("now = %v after the work ended, want 1s", got)
	}
}

func TestVirtualTimersFireAtTheirDeadlines(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
	}{
		{"sorted", []time.Duration{1, 2, 3}},
		{"reversed", []time.Duration{3, 2, 1}},
		{"ties", []time.Duration{2, 1, 2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(0, 0)
			v := NewVirtual(start)
			defer v.Close()
			v.Begin() // hold time until every timer exists
			var timers []Timer
			for _, d := range tt.delays {
				timers = append(timers, v.NewTimer(d*time.Second))
			}
			v.End()
			// Each timer fires exactly at its deadline, so time passed through them in
			// deadline order, and timers due together fired at the same instant.
			for i, timer := range timers {
				if got, want := (<-timer.C()).Sub(start), tt.delays[i]*time.Second; got != want {
					t.Errorf("timer %d fired at %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestVirtualStopAndAdvance(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0))
	defer v.Close()
	v.Begin()
	stopped := v.NewTimer(time.Second)
	kept := v.NewTimer(2 * time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	v.Advance(1500 * time.Millisecond)
	select {
	case <-kept.C():
		t.Fatal("2 s timer fired after advancing 1.5 s")
	default:
	}
	v.Advance(time.Second)
	<-kept.C()
	if kept.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	if got := v.Now().Sub(time.Unix(0, 0)); got != 2500*time.Millisecond {
		t.Fatalf("now = %v, want 2.5s", got)
	}
	v.End()
}

func TestStoppingFiredWakeTimerReleasesItsWork(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0))
	defer v.Close()
	v.Begin()
	wake := v.NewWakeTimer(time.Second, 0)
	v.Advance(time.Second) // fires it: its firing is now a unit of tracked work
	wake.Stop()            // nobody takes it over, so Stop must end it
	v.End()
	// With no work left, time must be free to move again.
	if err := Sleep(context.Background(), v, time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, Real{}, time.Hour); err == nil {
		t.Fatal("Sleep on a cancelled context returned nil")
	}
}

// TestSettleOrdersAnInstantByRank: a worker that settles waits for the other work of
// the instant, however long it takes in real time; settlers then go on one at a time,
// lowest rank first, whatever order they arrived in.
func TestSettleOrdersAnInstantByRank(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0))
	defer v.Close()
	ctx := context.Background()
	order := make(chan string, 2)
	v.Begin()
	v.Begin()
	go func() { // quick, but of a later rank
		if err := v.Settle(ctx, 2, 0); err != nil {
			t.Error(err)
		}
		order <- "rank 2"
		v.End()
	}()
	go func() { // slow, of an earlier rank
		time.Sleep(20 * time.Millisecond)
		if err := v.Settle(ctx, 1, 0); err != nil {
			t.Error(err)
		}
		order <- "rank 1"
		time.Sleep(10 * time.Millisecond) // what it started runs before rank 2 goes on
		v.End()
	}()
	if first, second := <-order, <-order; first != "rank 1" || second != "rank 2" {
		t.Fatalf("settled in the order %s, %s; want rank 1, rank 2", first, second)
	}
	if got := v.Now(); !got.Equal(time.Unix(0, 0)) {
		t.Errorf("time moved to %v while work settled", got)
	}
}

// TestWakeTimersDueTogetherFireOneAtATime: timers due at the same instant fire highest
// rank first, the next only once the work the first woke has ended.
func TestWakeTimersDueTogetherFireOneAtATime(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0))
	defer v.Close()
	v.Begin()
	late := v.NewWakeTimer(time.Second, 1)
	early := v.NewWakeTimer(time.Second, 2)
	v.End()
	<-early.C()
	expectStill(t, late, "the rank 1 timer fired while the rank 2 timer's work ran")
	v.End() // the work the rank 2 timer woke ends
	<-late.C()
	v.End()
}

// TestSettleHonoursContext: a settler whose context ends keeps its unit of work, so
// time stays still until it ends it.
func TestSettleHonoursContext(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0))
	defer v.Close()
	v.Begin() // the settler
	v.Begin() // other work that runs on
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := v.Settle(ctx, 0, 0); err == nil {
		t.Fatal("Settle returned nil while other work ran and its context ended")
	}
	v.End() // the other work
	timer := v.NewTimer(time.Second)
	expectStill(t, timer, "time moved while the settler still held its unit of work")
	v.End()
	<-timer.C()
}

// expectStill fails with why if timer fires within a short real wait.
func expectStill(t *testing.T, timer Timer, why string) {
	t.Helper()
	select {
	case <-timer.C():
		t.Fatal(why)
	case <-time.After(30 * time.Millisecond):
	}
}
