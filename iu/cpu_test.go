package iu

import (
	"context"
	"testing"
	"time"
)

// burn spins on the calling thread until it has used d of CPU.
func burn(d time.Duration) {
	start, _ := threadCPU()
	for {
		if now, _ := threadCPU(); now-start >= d {
			return
		}
	}
}

// TestCPUAccountingPerModule: a module that computes, itself and in a worker, is charged
// with that CPU time; a module that only waits is charged with next to nothing; a module
// that computes, waits and computes again is charged with its two stretches and nothing
// of what the others computed while it waited.
func TestCPUAccountingPerModule(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("this system cannot read a thread's CPU time")
	}
	const work = 40 * time.Millisecond
	busy := ModuleFunc{ModuleName: "busy", Fn: func(ctx context.Context, p *Ports) error {
		burn(work)
		p.Go(func(Worker) { burn(work) })
		return nil
	}}
	idle := ModuleFunc{ModuleName: "idle", Fn: func(ctx context.Context, p *Ports) error {
		_, err := p.Next(ctx, p.Now().Add(50*time.Millisecond))
		return err
	}}
	stepper := ModuleFunc{ModuleName: "stepper", Fn: func(ctx context.Context, p *Ports) error {
		burn(work)
		if _, err := p.Next(ctx, p.Now().Add(30*time.Millisecond)); err != nil {
			return err
		}
		burn(work)
		return nil
	}}
	n := NewNetwork(WithCPUAccounting())
	if err := n.Add(busy, idle, stepper); err != nil {
		t.Fatal(err)
	}
	mustRun(t, n)
	cpu := n.CPU()
	if cpu["busy"] < 2*work {
		t.Errorf("busy module charged %v, want at least %v", cpu["busy"], 2*work)
	}
	if cpu["idle"] >= work {
		t.Errorf("idle module charged %v, want far less than %v", cpu["idle"], work)
	}
	if got := cpu["stepper"]; got < 2*work || got >= 3*work {
		t.Errorf("stepper module charged %v, want its own %v", got, 2*work)
	}
	if NewNetwork().CPU() != nil {
		t.Error("a network without accounting reports CPU times")
	}
}
