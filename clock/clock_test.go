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
	select {
	case <-timer.C():
		t.Fatal("timer fired while tracked work was running")
	case <-time.After(50 * time.Millisecond):
	}
	v.End()
	<-timer.C()
	if got := v.Now().Sub(start); got != time.Second {
		t.Fatalf("now = %v after the work ended, want 1s", got)
	}
}

func TestVirtualTimersFireInDeadlineOrder(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		want   []int // indices in firing order
	}{
		{"sorted", []time.Duration{1, 2, 3}, []int{0, 1, 2}},
		{"reversed", []time.Duration{3, 2, 1}, []int{2, 1, 0}},
		{"ties keep creation order", []time.Duration{2, 1, 2, 1}, []int{1, 3, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVirtual(time.Unix(0, 0))
			defer v.Close()
			v.Begin() // hold time until every timer exists
			fired := make(chan int, len(tt.delays))
			for i, d := range tt.delays {
				timer := v.NewWakeTimer(d * time.Second)
				go func() { <-timer.C(); fired <- i; v.End() }()
			}
			v.End()
			for k, want := range tt.want {
				if got := <-fired; got != want {
					t.Fatalf("firing %d: timer %d, want %d", k, got, want)
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
	wake := v.NewWakeTimer(time.Second)
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
