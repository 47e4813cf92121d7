package speaker

import (
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
