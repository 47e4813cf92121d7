package webrtcapm_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/engines/webrtcapm"
	"github.com/parley-voice/parley/internal/testenv"
)

func newProcessor(t testing.TB, cfg webrtcapm.Config) *webrtcapm.Processor {
	t.Helper()
	p, err := webrtcapm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// speech returns a real recording at rate.
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

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []webrtcapm.Config{
		{SampleRate: 44100},
		{SampleRate: -1},
		{Echo: 7},
		{NoiseSuppression: 9},
		{GainControl: -1},
		{TargetLevelDBFS: 40},
		{CompressionGainDB: 91},
		{FixedGainDB: -1},
		{FixedGainDB: math.NaN()},
		{EchoFilterLength: -time.Millisecond},
		{EchoFilterLength: webrtcapm.MaxEchoFilterLength + time.Millisecond},
		{EchoInitialState: -time.Second},
		{EchoInitialState: webrtcapm.MaxEchoInitialState + time.Millisecond},
		{Echo: webrtcapm.EchoMobile, EchoFilterLength: 100 * time.Millisecond},
		{Echo: webrtcapm.EchoOff, EchoInitialState: time.Second},
		{Echo: webrtcapm.EchoOff, LinearOutput: true},
		{Echo: webrtcapm.EchoMobile, LinearOutput: true},
		{SampleRate: 48000, LinearOutput: true},
		{Echo: webrtcapm.EchoOff, Suppressor: webrtcapm.Suppressor{MaxGainRise: 4}},
		{Suppressor: webrtcapm.Suppressor{MaxGainRise: 0.5}},
		{Suppressor: webrtcapm.Suppressor{LowTransparent: 2, LowSuppress: 1}},
		{Suppressor: webrtcapm.Suppressor{HighTransparent: -1}},
		{Suppressor: webrtcapm.Suppressor{ReverbDecay: 1}},
		{Suppressor: webrtcapm.Suppressor{ReverbDecay: math.NaN()}},
	} {
		if p, err := webrtcapm.New(cfg); err == nil {
			p.Close()
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestFrameSize(t *testing.T) {
	for _, rate := range []int{8000, 16000, 32000, 48000} {
		p := newProcessor(t, webrtcapm.Config{SampleRate: rate})
		if p.FrameSize() != rate/100 || p.SampleRate() != rate {
			t.Fatalf("rate %d: frame size %d", rate, p.FrameSize())
		}
		for _, n := range []int{0, rate/100 - 1, rate/100 + 1} {
			if err := p.ProcessRender(make([]float32, n)); !errors.Is(err, webrtcapm.ErrFrameSize) {
				t.Errorf("rate %d: render of %d samples: %v", rate, n, err)
			}
			if err := p.ProcessCapture(make([]float32, n)); !errors.Is(err, webrtcapm.ErrFrameSize) {
				t.Errorf("rate %d: capture of %d samples: %v", rate, n, err)
			}
		}
		if err := p.ProcessRender(make([]float32, rate/100)); err != nil {
			t.Fatal(err)
		}
		if err := p.ProcessCapture(make([]float32, rate/100)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLinearOutputCalls: ProcessCaptureLinear gives a frame of linear output (the
// microphone's voice, with no echo to remove) only when the processor keeps it.
func TestLinearOutputCalls(t *testing.T) {
	p := newProcessor(t, webrtcapm.Config{})
	frame := make([]float32, p.FrameSize())
	if err := p.ProcessCaptureLinear(frame, make([]float32, len(frame))); err == nil {
		t.Error("a linear output from a processor that keeps none")
	}
	p = newProcessor(t, webrtcapm.Config{LinearOutput: true})
	if err := p.ProcessCaptureLinear(frame, make([]float32, len(frame)-1)); !errors.Is(err, webrtcapm.ErrFrameSize) {
		t.Errorf("a linear output of the wrong length: %v", err)
	}
	var in, lin float64
	for i := range 50 {
		near := make([]float32, len(frame))
		for k := range near {
			near[k] = float32(0.1 * math.Sin(2*math.Pi*440*float64(i*len(near)+k)/16000))
		}
		linear := make([]float32, len(frame))
		if err := p.ProcessRender(frame); err != nil {
			t.Fatal(err)
		}
		if err := p.ProcessCaptureLinear(near, linear); err != nil {
			t.Fatal(err)
		}
		if i >= 10 {
			for k := range near {
				in += float64(near[k]) * float64(near[k])
				lin += float64(linear[k]) * float64(linear[k])
			}
		}
	}
	if d := 10 * math.Log10(lin/in); math.Abs(d) > 1 {
		t.Errorf("with no echo the linear output is %.1f dB off the microphone's tone", d)
	}
	p.Close()
	if err := p.ProcessCaptureLinear(frame, make([]float32, len(frame))); !errors.Is(err, webrtcapm.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestClose(t *testing.T) {
	p, err := webrtcapm.New(webrtcapm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]float32, p.FrameSize())
	for range 3 {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ProcessRender(frame); !errors.Is(err, webrtcapm.ErrClosed) {
		t.Errorf("render after Close: %v", err)
	}
	if err := p.ProcessCapture(frame); !errors.Is(err, webrtcapm.ErrClosed) {
		t.Errorf("capture after Close: %v", err)
	}
	p.SetStreamDelay(time.Second)
	if s := p.Stats(); s != (webrtcapm.Stats{}) {
		t.Errorf("stats after Close: %+v", s)
	}
}

// TestLatency: Latency is the lag of the library's output behind its input, for the
// stages and rates it depends on (checked by cross-correlating real speech).
func TestLatency(t *testing.T) {
	configs := []webrtcapm.Config{
		{},
		{Echo: webrtcapm.EchoOff},
		{Echo: webrtcapm.EchoMobile},
		{Echo: webrtcapm.EchoOff, NoiseSuppression: webrtcapm.NoiseSuppressionHigh},
		{NoiseSuppression: webrtcapm.NoiseSuppressionModerate, HighPassFilter: true, GainController2: true, AdaptiveGain: true},
		{Echo: webrtcapm.EchoOff, GainControl: webrtcapm.GainControlAdaptiveDigital},
	}
	for _, rate := range []int{16000, 48000, 8000, 32000} {
		near := speech(t, "jfk.wav", rate)
		for _, cfg := range configs {
			cfg.SampleRate = rate
			t.Run(fmt.Sprintf("%d/%+v", rate, cfg), func(t *testing.T) {
				p := newProcessor(t, cfg)
				n := p.FrameSize()
				out := make([]float32, 0, len(near))
				for i := 0; i+n <= len(near); i += n {
					frame := append([]float32(nil), near[i:i+n]...)
					if err := p.ProcessRender(make([]float32, n)); err != nil {
						t.Fatal(err)
					}
					if err := p.ProcessCapture(frame); err != nil {
						t.Fatal(err)
					}
					out = append(out, frame...)
				}
				want := int(audio.DurationToSamples(p.Latency(), rate))
				lag, corr := bestLag(near, out, rate, want+rate/100)
				if d := lag - want; d < -1 || d > 1 {
					t.Fatalf("output lags %d samples (correlation %.3f), Latency says %d", lag, corr, want)
				}
			})
		}
	}
}

// bestLag finds the lag (0..maxLag) at which out best matches in, over 3 s of speech.
func bestLag(in, out []float32, rate, maxLag int) (int, float64) {
	from, to := rate, 4*rate
	best, at := -2.0, 0
	for lag := 0; lag <= maxLag; lag++ {
		var xy, xx, yy float64
		for i := from; i < to; i++ {
			x, y := float64(in[i]), float64(out[i+lag])
			xy += x * y
			xx += x * x
			yy += y * y
		}
		if c := xy / math.Sqrt(xx*yy); c > best {
			best, at = c, lag
		}
	}
	return at, best
}

// TestCancelsEcho: at 16 and 48 kHz, real speech through a simulated laptop comes out
// at least 25 dB quieter once AEC3 has converged, and its statistics are filled in;
// with the library's settings and with a longer filter and a shorter initial state.
func TestCancelsEcho(t *testing.T) {
	for _, rate := range []int{16000, 48000} {
		for _, tuned := range []webrtcapm.Config{{}, {EchoFilterLength: 104 * time.Millisecond, EchoInitialState: 500 * time.Millisecond}} {
			t.Run(fmt.Sprintf("%d/%v,%v", rate, tuned.EchoFilterLength, tuned.EchoInitialState), func(t *testing.T) {
				far := speech(t, "jfk.wav", rate)
				mic := laptop(t, far, rate)
				tuned.SampleRate = rate
				p := newProcessor(t, tuned)
				out := cancel(t, p, far, mic)
				from := 2 * rate
				reduction := 10 * math.Log10(energy(mic[from:len(out)])/energy(out[from:]))
				s := p.Stats()
				t.Logf("echo reduced by %.1f dB after 2 s; stats %+v", reduction, s)
				if reduction < 25 {
					t.Errorf("echo reduced by %.1f dB, want ≥ 25", reduction)
				}
				if !s.EchoReturnLoss.OK || !s.EchoReturnLossEnhancement.OK || !s.Delay.OK || !s.ResidualEchoLikelihood.OK {
					t.Errorf("statistics missing: %+v", s)
				}
			})
		}
	}
}

// TestTunedAEC3IsTheLibrarys: AEC3 made by our own factory with the library's filter
// length, initial state and suppressor given explicitly cancels sample for sample as the one
// AudioProcessing makes itself, so the factory builds the same canceller; other
// settings change the output.
func TestTunedAEC3IsTheLibrarys(t *testing.T) {
	const rate = 16000
	far := speech(t, "jfk.wav", rate)
	mic := laptop(t, far, rate)
	builtIn := cancel(t, newProcessor(t, webrtcapm.Config{}), far, mic)
	same := cancel(t, newProcessor(t, webrtcapm.Config{EchoFilterLength: 52 * time.Millisecond, EchoInitialState: 2500 * time.Millisecond, Suppressor: webrtcapm.LibrarySuppressor()}), far, mic)
	other := cancel(t, newProcessor(t, webrtcapm.Config{EchoFilterLength: 104 * time.Millisecond}), far, mic)
	for i := range builtIn {
		if builtIn[i] != same[i] {
			t.Fatalf("sample %d: %g from the library's own AEC3, %g from ours with its settings", i, builtIn[i], same[i])
		}
	}
	differ := 0
	for i := range builtIn {
		if builtIn[i] != other[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("a 104 ms filter changed nothing")
	}
}

// laptop is far heard through the simulated laptop: 30 ms, −6 dB, RT60 300 ms.
func laptop(t testing.TB, far []float32, rate int) []float32 {
	t.Helper()
	path, err := room.New(room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Rate: rate, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return path.Process(far)
}

// cancel runs far and mic through p frame by frame with the path's delay as the hint;
// the output is as long as the whole frames of mic.
func cancel(t testing.TB, p *webrtcapm.Processor, far, mic []float32) []float32 {
	t.Helper()
	p.SetStreamDelay(30 * time.Millisecond)
	n := p.FrameSize()
	var out []float32
	for i := 0; i+n <= len(far); i += n {
		frame := append([]float32(nil), mic[i:i+n]...)
		if err := p.ProcessRender(far[i : i+n]); err != nil {
			t.Fatal(err)
		}
		if err := p.ProcessCapture(frame); err != nil {
			t.Fatal(err)
		}
		out = append(out, frame...)
	}
	return out
}

func energy(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

// TestConcurrentUse: render, capture and stats from three goroutines, then Close while
// they still run (run with -race). Calls after Close fail cleanly.
func TestConcurrentUse(t *testing.T) {
	p, err := webrtcapm.New(webrtcapm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := p.FrameSize()
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
				if !errors.Is(err, webrtcapm.ErrClosed) {
					t.Error(err)
				}
				return
			}
		}
	}
	wg.Go(func() {
		far := make([]float32, n)
		worker(func() error { return p.ProcessRender(far) })
	})
	wg.Go(func() {
		near := make([]float32, n)
		worker(func() error { return p.ProcessCapture(near) })
	})
	wg.Go(func() {
		worker(func() error { p.Stats(); p.SetStreamDelay(20 * time.Millisecond); return nil })
	})
	time.Sleep(50 * time.Millisecond)
	p.Close()
	close(stop)
	wg.Wait()
}
