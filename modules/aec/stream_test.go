package aec

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// halver is a frame engine for testing the framing alone: it halves capture frames and
// records render frames. The real engines are tested through aec/webrtc and aec/speex.
type halver struct {
	n        int
	rendered []float32
	frames   int
	failAt   int // capture frame (from 1) that fails; 0: none
	closed   int
	delay    time.Duration
}

func (h *halver) FrameSize() int { return h.n }

func (h *halver) ProcessRender(far []float32) error {
	if len(far) != h.n {
		return errors.New("bad render frame")
	}
	h.rendered = append(h.rendered, far...)
	return nil
}

func (h *halver) ProcessCapture(near []float32) error {
	if len(near) != h.n {
		return errors.New("bad capture frame")
	}
	h.frames++
	if h.frames == h.failAt {
		near[0] = 99 // a failing engine may have scribbled on the frame
		return errors.New("engine failure")
	}
	for i := range near {
		near[i] /= 2
	}
	return nil
}

func (h *halver) SetStreamDelay(d time.Duration) { h.delay = d }
func (h *halver) Latency() time.Duration         { return 0 }
func (h *halver) Stats() Stats                   { return Stats{Delay: Duration{h.delay, true}} }
func (h *halver) Close() error                   { h.closed++; return nil }

func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i + 1)
	}
	return x
}

// TestStreamBlocks: whatever the block sizes, Capture returns as many samples as it
// got, exactly one frame behind, and Render hands the engine the audio in order.
func TestStreamBlocks(t *testing.T) {
	for _, sizes := range [][]int{{160}, {320}, {1}, {159}, {161}, {7, 500, 33, 0, 160, 1000}, {3200}} {
		h := &halver{n: 160}
		s, err := NewStream(h)
		if err != nil {
			t.Fatal(err)
		}
		in := ramp(5000)
		var out []float32
		for rest, i := in, 0; len(rest) > 0; i++ {
			k := min(len(rest), sizes[i%len(sizes)])
			if err := s.Render(rest[:k]); err != nil {
				t.Fatal(err)
			}
			got, err := s.Capture(rest[:k])
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != k {
				t.Fatalf("blocks %v: Capture(%d samples) returned %d", sizes, k, len(got))
			}
			out = append(out, got...)
			rest = rest[k:]
		}
		lat := s.LatencySamples()
		if lat != 160 || s.Latency() != 10*time.Millisecond {
			t.Fatalf("latency %d samples / %v, want 160 / 10ms", lat, s.Latency())
		}
		for i, v := range out {
			want := float32(0)
			if i >= lat {
				want = in[i-lat] / 2
			}
			if v != want {
				t.Fatalf("blocks %v: output[%d] = %g, want %g", sizes, i, v, want)
			}
		}
		whole := len(in) / 160 * 160
		if !slices.Equal(h.rendered, in[:whole]) {
			t.Fatalf("blocks %v: engine rendered %d samples, not the first %d of the input in order", sizes, len(h.rendered), whole)
		}
	}
}

func TestStreamRandomBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := &halver{n: 160}
	s, _ := NewStream(h)
	total := 0
	for range 2000 {
		k := rng.IntN(900)
		got, err := s.Capture(make([]float32, k))
		if err != nil || len(got) != k {
			t.Fatalf("Capture(%d) = %d samples, %v", k, len(got), err)
		}
		total += k
	}
	if want := (total + 160) / 160; h.frames != want-1 && h.frames != want {
		t.Fatalf("%d frames processed for %d samples", h.frames, total)
	}
}

// TestStreamEngineError: a failing frame goes out unprocessed, the rest is processed,
// the length promise holds, and the error says what failed.
func TestStreamEngineError(t *testing.T) {
	h := &halver{n: 4, failAt: 2}
	s, _ := NewStream(h)
	in := ramp(16)
	out, err := s.Capture(in)
	if err == nil || len(out) != 16 {
		t.Fatalf("Capture = %d samples, %v; want 16 and an error", len(out), err)
	}
	want := []float32{0, 0, 0, 0, 0.5, 1, 1.5, 2, 5, 6, 7, 8, 4.5, 5, 5.5, 6}
	if !slices.Equal(out, want) {
		t.Fatalf("output %v, want %v", out, want)
	}
}

func TestStreamClose(t *testing.T) {
	h := &halver{n: 160}
	s, _ := NewStream(h)
	s.SetDelay(30 * time.Millisecond)
	if st := s.Stats(); !st.Delay.OK || st.Delay.D != 30*time.Millisecond {
		t.Fatalf("stats %+v: the delay did not reach the engine", st)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if h.closed != 1 {
		t.Fatalf("engine closed %d times, want 1", h.closed)
	}
	if err := s.Render(make([]float32, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Render after Close: %v", err)
	}
	if _, err := s.Capture(make([]float32, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Capture after Close: %v", err)
	}
	s.SetDelay(time.Second)
	if h.delay != 30*time.Millisecond || s.Stats() != (Stats{}) {
		t.Fatal("a closed stream still reached its engine")
	}
}

func TestNewStreamBadEngine(t *testing.T) {
	h := &halver{n: 0}
	if _, err := NewStream(h); err == nil {
		t.Fatal("engine with frame size 0 accepted")
	}
	if h.closed != 1 {
		t.Fatal("a refused engine was not closed")
	}
}

// FuzzStream: any sequence of block sizes (one byte each, times 7) keeps the length
// promise and the one-frame delay.
func FuzzStream(f *testing.F) {
	f.Add([]byte{0, 1, 2, 255, 23, 160 / 7})
	f.Add([]byte{46, 46, 46})
	f.Fuzz(func(t *testing.T, sizes []byte) {
		h := &halver{n: 160}
		s, _ := NewStream(h)
		var in, out []float32
		next := float32(1)
		for _, b := range sizes {
			block := make([]float32, int(b)*7)
			for i := range block {
				block[i] = next
				next++
			}
			if err := s.Render(block); err != nil {
				t.Fatal(err)
			}
			got, err := s.Capture(block)
			if err != nil || len(got) != len(block) {
				t.Fatalf("Capture(%d samples) = %d samples, %v", len(block), len(got), err)
			}
			in = append(in, block...)
			out = append(out, got...)
		}
		for i, v := range out {
			want := float32(0)
			if i >= 160 {
				want = in[i-160] / 2
			}
			if v != want {
				t.Fatalf("output[%d] = %g, want %g", i, v, want)
			}
		}
	})
}

// TestStreamNonFinite: NaN and infinities never reach the engine.
func TestStreamNonFinite(t *testing.T) {
	h := &halver{n: 4}
	s, _ := NewStream(h)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	bad := []float32{1, nan, inf, -inf, 2, 3, nan, 4}
	if err := s.Render(bad); err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 0, 0, 0, 2, 3, 0, 4}; !slices.Equal(h.rendered, want) {
		t.Fatalf("engine rendered %v, want %v", h.rendered, want)
	}
	out, err := s.Capture(bad)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{0, 0, 0, 0, 0.5, 0, 0, 0}; !slices.Equal(out, want) {
		t.Fatalf("output %v, want %v", out, want)
	}
}

// thirder is a halver whose linear output is a third of the frame.
type thirder struct{ halver }

func (h *thirder) ProcessCaptureLinear(near, linear []float32) error {
	for i := range near {
		linear[i] = near[i] / 3
	}
	return h.ProcessCapture(near)
}

// TestStreamLinear: a LinearEngine's linear output comes out beside the cleaned audio,
// as long and as late; a frame the engine fails on goes out unprocessed in both; and
// through a TailGate both stay aligned. A plain engine gives none.
func TestStreamLinear(t *testing.T) {
	h := &thirder{halver{n: 160, failAt: 3}}
	s, err := NewStream(h)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewTailGate(s, TailConfig{})
	if err != nil {
		t.Fatal(err)
	}
	in := ramp(5000)
	var out, lin []float32
	for rest, i := in, 0; len(rest) > 0; i++ {
		k := min(len(rest), []int{7, 500, 33, 160}[i%4])
		o, l, err := g.CaptureLinear(rest[:k])
		if err != nil && h.frames != h.failAt {
			t.Fatal(err)
		}
		if len(o) != k || len(l) != k {
			t.Fatalf("CaptureLinear(%d samples) returned %d and %d", k, len(o), len(l))
		}
		out, lin = append(out, o...), append(lin, l...)
		rest = rest[k:]
	}
	lat := g.LatencySamples()
	for i := lat; i < len(lin); i++ {
		want := in[i-lat] / 3
		if frame := (i - lat) / 160; frame == h.failAt-1 {
			want = in[i-lat]
		}
		if lin[i] != want {
			t.Fatalf("linear[%d] = %g, want %g", i, lin[i], want)
		}
	}
	if _, l, _ := mustStream(t, &halver{n: 160}).CaptureLinear(ramp(320)); l != nil {
		t.Error("a linear output from an engine without one")
	}
}

func mustStream(t *testing.T, e Engine) *Stream {
	t.Helper()
	s, err := NewStream(e)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
