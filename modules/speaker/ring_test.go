package speaker

import (
	"math"
	"runtime"
	"sync"
	"testing"
)

// TestRingConcurrent runs the ring's writer and renderer on two goroutines, as the
// module and the PortAudio callback do, with pauses toggled underneath: the renderer
// must see the writer's samples in order, each exactly once, and the race detector must
// find nothing.
func TestRingConcurrent(t *testing.T) {
	const total = 200000
	l := newRing(1024)
	var wg sync.WaitGroup
	wg.Add(1)
	got := make([]float32, 0, total)
	go func() { // the renderer
		defer wg.Done()
		rd := NewRenderer(l)
		buf := make([]float32, 2*97)
		for len(got) < total {
			rd.Render(buf, 97, 2)
			runtime.Gosched()
			for i := 0; i < 97; i++ {
				if buf[2*i] != buf[2*i+1] {
					t.Errorf("channels differ at %d", i)
					return
				}
				if v := buf[2*i]; v != 0 {
					got = append(got, v)
				}
			}
		}
	}()
	// The writer: writes 1, 2, 3, ... (never 0, so silence is recognisable), and pauses or
	// resumes every 5000 samples written.
	next := float32(1)
	var w int64
	req := uint64(0)
	for next <= total {
		free := int64(len(l.ring)) - (w - l.r.Load())
		if free == 0 {
			runtime.Gosched()
			continue
		}
		for ; free > 0 && next <= total; free-- {
			l.ring[w&l.mask] = next
			w++
			next++
			if w%5000 == 0 {
				req++
				l.pause.Store(req%2 == 1)
				l.req.Store(req)
			}
		}
		l.w.Store(w)
		if l.pause.Load() && free == 0 {
			// The renderer cannot drain a full ring while paused: resume.
			req++
			l.pause.Store(false)
			l.req.Store(req)
		}
	}
	if l.pause.Load() {
		req++
		l.pause.Store(false)
		l.req.Store(req)
	}
	wg.Wait()
	for i, v := range got {
		if v != float32(i+1) {
			t.Fatalf("sample %d is %g, want %d", i, v, i+1)
		}
	}
	// Every transition between audio and silence was recorded, in order.
	var last int64 = -1
	for r := l.recR.Load(); r < l.recW.Load(); r++ {
		rec := l.rec[r%recordSlots]
		if rec.frame < last {
			t.Fatalf("records out of order")
		}
		last = rec.frame
	}
}

// TestRingGainConcurrent changes the level from the writer's goroutine while the
// renderer plays full-scale audio on its own: every sample lies between the two levels,
// the level never moves faster than the ramp allows (no clicks), and the renderer's gain
// records say exactly which level each frame had.
func TestRingGainConcurrent(t *testing.T) {
	const total = 100000
	const low = float32(0.25)
	l := newRing(4096)
	l.setRamp(160)
	var wg sync.WaitGroup
	out := make([]float32, 0, total)
	wg.Add(1)
	go func() { // the renderer
		defer wg.Done()
		rd := NewRenderer(l)
		buf := make([]float32, 61)
		for l.r.Load() < total {
			rd.Render(buf, 61, 1)
			out = append(out, buf...)
			runtime.Gosched()
		}
	}()
	var w int64
	var changes []gainChange
	drain := func() { // as the player does at every step
		for r := l.gainR.Load(); r < l.gainW.Load(); r++ {
			changes = append(changes, l.gainRec[r%gainSlots])
			l.gainR.Store(r + 1)
		}
	}
	for i := 0; l.r.Load() < total; i++ { // the renderer stops once it has read total
		drain()
		for ; w-l.r.Load() < int64(len(l.ring)); w++ {
			l.ring[w&l.mask] = 1
		}
		l.w.Store(w)
		if i%50 == 0 {
			g := float32(1)
			if (i/50)%2 == 0 {
				g = low
			}
			l.gain.Store(math.Float32bits(g))
		}
		runtime.Gosched()
	}
	wg.Wait()
	drain()
	if lost := l.gainLost.Load(); lost > 0 {
		t.Fatalf("%d level changes lost", lost)
	}
	if len(changes) < 2 {
		t.Fatalf("%d level changes recorded", len(changes))
	}
	step := float64(1-low) / 160 * 1.0001
	for f, v := range out {
		if f > 0 && out[f-1] != 0 && v != 0 && math.Abs(float64(v-out[f-1])) > step {
			t.Fatalf("frame %d: level jumps from %g to %g", f, out[f-1], v)
		}
		if v != 0 && (v < low || v > 1) {
			t.Fatalf("frame %d at level %g", f, v)
		}
		want := float32(1)
		for _, c := range changes {
			if c.frame <= int64(f) {
				want = c.at(int64(f))
			}
		}
		if v != 0 && v != want {
			t.Fatalf("frame %d at level %g, the records say %g", f, v, want)
		}
	}
}
