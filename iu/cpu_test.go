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
// with that CPU time; a module that only waits is charged with next to nothing.
func TestCPUAccountingPerModule(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("this system cannot read a thread's CPU time")
	}
	const work = 40 * time.Millisecond
	busy := ModuleFunc{ModuleName: "busy", Fn: func(ctx context.Context, p *Ports) error {
		burn(work)
		p.Go(func() { burn(work) })
		return nil
	}}
	idle := ModuleFunc{ModuleName: "idle", Fn: func(ctx context.Context, p *Ports) error {
		_, err := p.Next(ctx, p.Now().Add(50*time.Millisecond))
		return err
	}}
	n := NewNetwork(WithCPUAccounting())
	if err := n.Add(busy, idle); err != nil {
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
	if NewNetwork().CPU() != nil {
		t.Error("a network without accounting reports CPU times")
	}
}
