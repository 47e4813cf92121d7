package iu

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"
)

// samples is a test payload as large as a block of audio.
type samples []float32

func (samples) Kind() string    { return "samples" }
func (samples) Summary() string { return "" }

// TestNetworkForgetsFinalIUs: nothing in the runtime keeps an IU once it is final, and
// an IU's links (Previous, GroundedIn) name IUs without holding them. A long chain of
// large IUs, each grounded in the one before, relayed into IUs grounded in them and
// recorded by a timeline, leaves the heap holding about what one of them takes, not
// what the session sent.
func TestNetworkForgetsFinalIUs(t *testing.T) {
	const (
		count = 20_000
		size  = 4096 // 16 KB a payload: 320 MB over the chain
		limit = 32 << 20
	)
	src := ModuleFunc{ModuleName: "src", Fn: func(ctx context.Context, p *Ports) error {
		var prev []ID
		for range count {
			u := p.NewIU(make(samples, size), prev...)
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
			prev = []ID{u.ID}
		}
		return nil
	}}
	relay := ModuleFunc{ModuleName: "relay", Fn: func(ctx context.Context, p *Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == EventInputDone {
				return err
			}
			for _, up := range ev.Message.Updates {
				if up.Type != Add {
					continue
				}
				u := p.NewIU(up.IU.Payload, up.IU.ID)
				if err := p.Send(ctx, AddOf(u), UpdateOf(u, make(samples, size)), CommitOf(u)); err != nil {
					return err
				}
			}
		}
	}}
	heap := make(chan uint64, 1)
	sink := ModuleFunc{ModuleName: "sink", Fn: func(ctx context.Context, p *Ports) error {
		seen := 0
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind == EventInputDone {
				break
			}
			seen += len(ev.Message.Updates)
		}
		if seen != 3*count {
			t.Errorf("the sink saw %d updates, want %d", seen, 3*count)
		}
		// The network is still running: what it holds now, it holds for the session.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap <- ms.HeapAlloc
		return nil
	}}
	tl := NewTimeline(io.Discard, time.Now())
	n := NewNetwork(WithObserver(tl))
	if err := n.Add(src, relay, sink); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]Module{{src, relay}, {relay, sink}} {
		if err := n.Connect(c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-heap; got > limit {
		t.Errorf("after %d IUs of %d KB the heap holds %d MB, more than %d MB", 2*count, size*4>>10, got>>20, limit>>20)
	}
}
