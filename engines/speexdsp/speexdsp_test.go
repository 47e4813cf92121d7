package speexdsp_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/engines/speexdsp"
	"github.com/parley-voice/parley/internal/testenv"
)

func newCanceller(t testing.TB, cfg speexdsp.Config) *speexdsp.Canceller {
	t.Helper()
	c, err := speexdsp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func speech(t testing.TB, name string, rate int) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(testenv.SharedFile(t, "audio/"+name))
	if err != nil {
		t.Fatal(err)
	}
	g, err := audio.ResampleFrame(audio.Downmix(f), rate)
	if err != nil {
		t.Fatal(err)
	}
	return g.Samples
}

func energy(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []speexdsp.Config{
		{SampleRate: 4000},
		{SampleRate: 44101},
		{FilterLength: time.Millisecond},
		{FilterLength: 2 * time.Second},
		{EchoSuppressDB: 3},
		{EchoSuppressActiveDB: -101},
		{NoiseSuppressDB: 1},
	} {
		if c, err := speexdsp.New(cfg); err == nil {
			c.Close()
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestFrameSize(t *testing.T) {
	c := newCanceller(t, speexdsp.Config{SampleRate: 48000})
	if c.FrameSize() != 480 || c.SampleRate() != 48000 {
		t.Fatalf("frame size %d at %d Hz", c.FrameSize(), c.SampleRate())
	}
	for _, n := range []int{0, 479, 481} {
		if err := c.ProcessRender(make([]float32, n)); !errors.Is(err, speexdsp.ErrFrameSize) {
			t.Errorf("render of %d samples: %v", n, err)
		}
		if err := c.ProcessCapture(make([]float32, n)); !errors.Is(err, speexdsp.ErrFrameSize) {
			t.Errorf("capture of %d samples: %v", n, err)
		}
	}
}

func TestClose(t *testing.T) {
	for _, linear := range []bool{false, true} {
		c, err := speexdsp.New(speexdsp.Config{LinearOnly: linear})
		if err != nil {
			t.Fatal(err)
		}
		frame := make([]float32, c.FrameSize())
		if err := c.ProcessRender(frame); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.ProcessRender(frame); !errors.Is(err, speexdsp.ErrClosed) {
			t.Errorf("render after Close: %v", err)
		}
		if err := c.ProcessCapture(frame); !errors.Is(err, speexdsp.ErrClosed) {
			t.Errorf("capture after Close: %v", err)
		}
		c.SetStreamDelay(time.Second)
		if s := c.Stats(); s != (speexdsp.Stats{}) {
			t.Errorf("stats after Close: %+v", s)
		}
	}
}

// TestLatency: the linear filter's output is in step with its input, the
// preprocessor's one frame behind (checked by cross-correlating real speech).
func TestLatency(t *testing.T) {
	for _, rate := range []int{16000, 48000} {
		near := speech(t, "jfk.wav", rate)
		for _, linear := range []bool{false, true} {
			c := newCanceller(t, speexdsp.Config{SampleRate: rate, LinearOnly: linear})
			n := c.FrameSize()
			var out []float32
			for i := 0; i+n <= len(near); i += n {
				frame := append([]float32(nil), near[i:i+n]...)
				if err := c.ProcessCapture(frame); err != nil {
					t.Fatal(err)
				}
				out = append(out, frame...)
			}
			want := int(audio.DurationToSamples(c.Latency(), rate))
			best, at := -2.0, 0
			for lag := 0; lag <= want+n; lag++ {
				var xy, xx, yy float64
				for i := rate; i < 4*rate; i++ {
					x, y := float64(near[i]), float64(out[i+lag])
					xy, xx, yy = xy+x*y, xx+x*x, yy+y*y
				}
				if r := xy / math.Sqrt(xx*yy); r > best {
					best, at = r, lag
				}
			}
			if d := at - want; d < -1 || d > 1 {
				t.Errorf("%d Hz, linear only %v: output lags %d samples (correlation %.3f), Latency says %d", rate, linear, at, best, want)
			}
		}
	}
}

// run plays far through path into a canceller, render and capture interleaved frame by
// frame, and returns the echo reduction in dB over the audio after skip.
func run(t *testing.T, c *speexdsp.Canceller, far []float32, path room.Config, skip time.Duration) float64 {
	t.Helper()
	p, err := room.New(path)
	if err != nil {
		t.Fatal(err)
	}
	mic := p.Process(far)
	n := c.FrameSize()
	lat := int(audio.DurationToSamples(c.Latency(), c.SampleRate()))
	from := int(audio.DurationToSamples(skip, c.SampleRate()))
	out := make([]float32, 0, len(far))
	for i := 0; i+n <= len(far); i += n {
		frame := append([]float32(nil), mic[i:i+n]...)
		if err := c.ProcessRender(far[i : i+n]); err != nil {
			t.Fatal(err)
		}
		if err := c.ProcessCapture(frame); err != nil {
			t.Fatal(err)
		}
		out = append(out, frame...)
	}
	return 10 * math.Log10(energy(mic[from:len(out)-lat])/energy(out[from+lat:]))
}

// TestCancelsEcho: real speech through a simulated laptop is reduced by the linear
// filter alone and further by the residual echo suppressor, and the filter's own
// view of the path (delay, loss) matches the simulation.
func TestCancelsEcho(t *testing.T) {
	far := speech(t, "austen-0870.wav", 16000)
	far = append(far, speech(t, "jfk.wav", 16000)...)
	path := room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Seed: 1}
	for _, linear := range []bool{true, false} {
		t.Run(fmt.Sprint("linear only=", linear), func(t *testing.T) {
			c := newCanceller(t, speexdsp.Config{LinearOnly: linear})
			got := run(t, c, far, path, 5*time.Second)
			s := c.Stats()
			t.Logf("echo reduced by %.1f dB after 5 s; stats %+v", got, s)
			want := map[bool]float64{true: 15, false: 25}[linear]
			if got < want {
				t.Errorf("echo reduced by %.1f dB, want ≥ %g", got, want)
			}
			if s.Delay < 29*time.Millisecond || s.Delay > 31*time.Millisecond {
				t.Errorf("filter peaks at %v, the path's delay is 30ms", s.Delay)
			}
			if !s.EchoReturnLossOK || math.Abs(s.EchoReturnLoss-6) > 1.5 {
				t.Errorf("filter's echo return loss %.1f dB (ok %v), the path's is 6 dB", s.EchoReturnLoss, s.EchoReturnLossOK)
			}
			if s.Underruns != 0 || s.Dropped != 0 {
				t.Errorf("render and capture in step, yet %d underruns and %d drops", s.Underruns, s.Dropped)
			}
		})
	}
}

// TestDelayHint: with a 150 ms path and a 100 ms filter, the echo lies beyond the
// filter unless the delay hint holds the reference back.
func TestDelayHint(t *testing.T) {
	far := speech(t, "austen-0870.wav", 16000)
	far = append(far, speech(t, "jfk.wav", 16000)...)
	path := room.Config{Delay: 150 * time.Millisecond, GainDB: -6, RT60: 100 * time.Millisecond, Seed: 2}
	cfg := speexdsp.Config{FilterLength: 100 * time.Millisecond, LinearOnly: true}
	without := run(t, newCanceller(t, cfg), far, path, 5*time.Second)
	c := newCanceller(t, cfg)
	c.SetStreamDelay(150 * time.Millisecond)
	with := run(t, c, far, path, 5*time.Second)
	t.Logf("echo reduced by %.1f dB without the hint, %.1f dB with it; stats %+v", without, with, c.Stats())
	if without > 3 {
		t.Errorf("without the hint the echo was reduced by %.1f dB: the test path is not beyond the filter", without)
	}
	if with < 15 {
		t.Errorf("with the hint the echo was reduced by only %.1f dB", with)
	}
	if d := c.Stats().Delay; d < 145*time.Millisecond || d > 155*time.Millisecond {
		t.Errorf("delay estimate %v with the hint, want 150ms", d)
	}
}

// TestQueue: capture without render pairs with silence (counted), render far ahead
// of capture drops the oldest frames (counted), and changing the hint moves the
// pairing.
func TestQueue(t *testing.T) {
	c := newCanceller(t, speexdsp.Config{LinearOnly: true})
	frame := make([]float32, c.FrameSize())
	for range 5 {
		if err := c.ProcessCapture(frame); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Underruns != 5 {
		t.Errorf("%d underruns after 5 captures without render", s.Underruns)
	}
	over := int(speexdsp.MaxQueue/(10*time.Millisecond)) + 7
	for range over {
		if err := c.ProcessRender(frame); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Dropped != 7 {
		t.Errorf("%d render frames dropped, want 7", s.Dropped)
	}
	c.SetStreamDelay(time.Hour) // clamped
	c.SetStreamDelay(-time.Hour)
	if err := c.ProcessCapture(frame); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentUse: render, capture and stats from three goroutines, then Close while
// they still run (run with -race).
func TestConcurrentUse(t *testing.T) {
	c, err := speexdsp.New(speexdsp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := c.FrameSize()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	worker := func(step func() error) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := step(); err != nil {
				if !errors.Is(err, speexdsp.ErrClosed) {
					t.Error(err)
				}
				return
			}
		}
	}
	wg.Go(func() {
		far := make([]float32, n)
		worker(func() error { return c.ProcessRender(far) })
	})
	wg.Go(func() {
		near := make([]float32, n)
		worker(func() error { return c.ProcessCapture(near) })
	})
	wg.Go(func() {
		worker(func() error { c.Stats(); c.SetStreamDelay(40 * time.Millisecond); return nil })
	})
	time.Sleep(50 * time.Millisecond)
	c.Close()
	close(stop)
	wg.Wait()
}
