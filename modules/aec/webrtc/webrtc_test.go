package webrtc

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/engines/webrtcapm"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/aec/internal/aectest"
	"github.com/parley-voice/parley/modules/aec/measure"
)

func newCanceller(t testing.TB, cfg webrtcapm.Config) *aec.Stream {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t testing.TB, s measure.Scene) measure.Result {
	t.Helper()
	r, err := measure.Run(newCanceller(t, webrtcapm.Config{}), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestERLE is the target on the simulated laptop (30 ms, −6 dB, RT60 300 ms)
// with the agent's real synthesized voice: ERLE ≥ 25 dB after convergence, and
// convergence within 1 s.
func TestERLE(t *testing.T) {
	far := aectest.AgentSpeech(t)
	path := aectest.Laptop()
	r := run(t, measure.Scene{Far: far, Path: path, Hint: path.Delay})
	t.Logf("agent voice (espeak-ng), %.1f s: %v", float64(len(far))/aec.Rate, r)
	t.Logf("AEC3's own stats at the end: %+v", r.Stats)
	if !r.Converged || r.Convergence > time.Second {
		t.Errorf("convergence %v (converged %v), want ≤ 1s", r.Convergence, r.Converged)
	}
	if r.ERLE < measure.Target {
		t.Errorf("ERLE after convergence %.1f dB, want ≥ %g", r.ERLE, measure.Target)
	}
}

// TestERLERecordedVoice: the same with human recordings as the far end.
func TestERLERecordedVoice(t *testing.T) {
	far := aectest.Recordings(t, 300*time.Millisecond, "austen-0870.wav", "austen-0890.wav", "austen-0920.wav", "leopard_test.wav")
	path := aectest.Laptop()
	r := run(t, measure.Scene{Far: far, Path: path, Hint: path.Delay})
	t.Logf("recorded voice, %.1f s: %v", float64(len(far))/aec.Rate, r)
	if r.ERLE < measure.Target {
		t.Errorf("ERLE after convergence %.1f dB, want ≥ %g", r.ERLE, measure.Target)
	}
}

// TestDelayHint: AEC3 estimates the delay itself, so a wrong hint must not break it.
func TestDelayHint(t *testing.T) {
	far := aectest.AgentSpeech(t)
	path := aectest.Laptop()
	for _, hint := range []time.Duration{path.Delay, 0, path.Delay + 50*time.Millisecond} {
		t.Run(fmt.Sprint("hint=", hint), func(t *testing.T) {
			r := run(t, measure.Scene{Far: far, Path: path, Hint: hint})
			t.Logf("%v; AEC3 delay estimate %v", r, r.Stats.Delay)
			if r.ERLE < measure.Target {
				t.Errorf("ERLE after convergence %.1f dB, want ≥ %g", r.ERLE, measure.Target)
			}
		})
	}
}

// TestLongDelay: AEC3 finds long echo delays (a laptop's device buffers) without a
// hint, up to the 500 ms its delay estimator covers.
func TestLongDelay(t *testing.T) {
	far := aectest.AgentSpeech(t)
	for _, delay := range []time.Duration{200 * time.Millisecond, 450 * time.Millisecond} {
		t.Run(fmt.Sprint("delay=", delay), func(t *testing.T) {
			path := aectest.Laptop()
			path.Delay = delay
			r := run(t, measure.Scene{Far: far, Path: path})
			t.Logf("hint 0: %v; AEC3 delay estimate %v", r, r.Stats.Delay)
			if r.ERLE < measure.Target {
				t.Errorf("ERLE %.1f dB, want ≥ %g", r.ERLE, measure.Target)
			}
			if d := r.Stats.Delay; !d.OK || d.D < delay-10*time.Millisecond || d.D > delay+10*time.Millisecond {
				t.Errorf("AEC3 delay estimate %v, the path's is %v", d, delay)
			}
		})
	}
}

// TestDoubleTalk: the user speaks (a real recording) while the agent talks, as loud as
// the echo at the microphone, 6 dB quieter and 6 dB louder; the user's voice must come
// through. The limits are asserted for equal levels; AEC3 suppresses part of the near end while it suppresses the echo.
func TestDoubleTalk(t *testing.T) {
	far := aectest.AgentSpeech(t)
	near := aectest.Recording(t, "jfk.wav")
	path := aectest.Laptop()
	for _, ser := range []float64{0, -6, 6} {
		t.Run(fmt.Sprintf("near-to-echo=%+gdB", ser), func(t *testing.T) {
			r := run(t, measure.Scene{Far: far, Near: near, NearAt: 5 * time.Second, NearToEchoDB: ser, Path: path, Hint: path.Delay})
			d := r.DoubleTalk
			t.Logf("%v", r)
			if d.Windows < 20 {
				t.Fatalf("only %d double-talk windows", d.Windows)
			}
			if ser != 0 {
				return
			}
			if d.NearAttenuation > 6 {
				t.Errorf("near end attenuated by %.1f dB in double talk, want ≤ 6", d.NearAttenuation)
			}
			if d.NearToRestOut < d.NearToRestMic+5 || d.Correlation < d.CorrelationInput+0.05 {
				t.Errorf("near-to-rest ratio %.1f dB at the mic, %.1f dB out, correlation %.2f → %.2f: want ≥ 5 dB and 0.05 better",
					d.NearToRestMic, d.NearToRestOut, d.CorrelationInput, d.Correlation)
			}
		})
	}
}

// TestBlockSizes: blocks that do not match the engine's frames cancel as well.
func TestBlockSizes(t *testing.T) {
	far := aectest.AgentSpeech(t)
	path := aectest.Laptop()
	for _, block := range []int{160, 320, 257, 1000} {
		r := run(t, measure.Scene{Far: far, Path: path, Hint: path.Delay, Block: block})
		t.Logf("block %d: %v", block, r)
		if r.ERLE < measure.Target {
			t.Errorf("block %d: ERLE %.1f dB, want ≥ %g", block, r.ERLE, measure.Target)
		}
	}
}

// BenchmarkCanceller: CPU time per second of 16 kHz audio (render and capture) on the
// simulated laptop with the agent's voice. rtf is CPU seconds per audio second.
func BenchmarkCanceller(b *testing.B) {
	for _, cfg := range []webrtcapm.Config{{}, {NoiseSuppression: webrtcapm.NoiseSuppressionModerate, HighPassFilter: true}} {
		b.Run(fmt.Sprintf("ns=%d", cfg.NoiseSuppression), func(b *testing.B) {
			aectest.BenchmarkCanceller(b, newCanceller(b, cfg))
		})
	}
}

// BenchmarkERLE reports ERLE, convergence and double-talk figures on the simulated
// laptop for each delay hint, and with the pipeline's tail gate (aec.TailGate) around
// the canceller: go test -run XXX -bench ERLE -benchtime 1x.
func BenchmarkERLE(b *testing.B) {
	for _, hint := range []time.Duration{30 * time.Millisecond, 0, 80 * time.Millisecond} {
		b.Run(fmt.Sprint("hint=", hint), func(b *testing.B) {
			aectest.BenchmarkERLE(b, hint, func() aec.Canceller { return newCanceller(b, webrtcapm.Config{}) })
		})
	}
	b.Run("hint=30ms,gate", func(b *testing.B) {
		aectest.BenchmarkERLE(b, 30*time.Millisecond, func() aec.Canceller {
			g, err := aec.NewTailGate(newCanceller(b, webrtcapm.Config{}), aec.TailConfig{})
			if err != nil {
				b.Fatal(err)
			}
			return g
		})
	})
}

// TestBadInput: a burst of NaN and infinities from a broken source, on both streams,
// does not poison AEC3: the output stays finite and the echo after the burst is still
// cancelled by ≥ 25 dB.
func TestBadInput(t *testing.T) {
	far := aectest.AgentSpeech(t)
	path, err := room.New(aectest.Laptop())
	if err != nil {
		t.Fatal(err)
	}
	mic := path.Process(far)
	echo := append([]float32(nil), mic...)
	for i := 3 * aec.Rate; i < 3*aec.Rate+800; i++ {
		far[i], mic[i] = float32(math.NaN()), float32(math.Inf(1-2*(i%2)))
	}
	c := newCanceller(t, webrtcapm.Config{})
	c.SetDelay(aectest.Laptop().Delay)
	var out []float32
	for i := 0; i+160 <= len(far); i += 160 {
		if err := c.Render(far[i : i+160]); err != nil {
			t.Fatal(err)
		}
		o, err := c.Capture(mic[i : i+160])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o...)
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("non-finite output at sample %d", i)
		}
	}
	lat, from := c.LatencySamples(), 5*aec.Rate
	var e, o float64
	for i := from; i+lat < len(out); i++ {
		e += float64(echo[i]) * float64(echo[i])
		o += float64(out[i+lat]) * float64(out[i+lat])
	}
	if got := 10 * math.Log10(e/o); got < measure.Target {
		t.Fatalf("echo reduced by %.1f dB after the burst, want ≥ %g", got, measure.Target)
	}
}

// TestMicClockDrift: a microphone whose clock runs faster or slower than the speaker's
// moves the echo in its stream, 1 ms in 10 s at 100 ppm (a poor device). The aec
// module moves the reference only past 5–20 ms (aec.Module's place), so AEC3's delay
// estimator must absorb the drift in between. At 100 ppm it converges as fast as
// without drift and never falls below the target; at 1000 ppm (1 ms a second) the
// echo stays cancelled by ≥ 25 dB overall, with dips below it while the delay
// estimate steps; 3000 ppm is logged, not judged.
func TestMicClockDrift(t *testing.T) {
	far := aectest.AgentSpeech(t)
	path := aectest.Laptop()
	for _, ppm := range []int{100, 1000, -1000, 3000} {
		t.Run(fmt.Sprintf("%+dppm", ppm), func(t *testing.T) {
			r := run(t, measure.Scene{Far: far, Path: path, Hint: path.Delay, MicClockPPM: ppm})
			t.Logf("%v; AEC3 delay estimate at the end %v (the echo's: %v)", r, r.Stats.Delay,
				path.Delay+time.Duration(float64(len(far))/aec.Rate*float64(ppm))*time.Microsecond)
			switch {
			case ppm == 100 && (!r.Converged || r.Convergence > time.Second || r.AboveTarget < 1):
				t.Errorf("convergence %v (converged %v), %.0f%% of windows at the target, want ≤ 1s and all",
					r.Convergence, r.Converged, 100*r.AboveTarget)
			case ppm <= 1000 && r.ERLE < measure.Target:
				t.Errorf("ERLE after convergence %.1f dB, want ≥ %g", r.ERLE, measure.Target)
			}
		})
	}
}

// TestTailGate: after each of the agent's pauses AEC3 lets the room's reverberation
// through (from about 80 ms on), and when the agent speaks again the first 10–20 ms of
// its echo; with aec.TailGate around it, the ERLE of every tail and of every onset's
// first 40 ms is ≥ 25 dB, in the room and in one with RT60 500 ms.
func TestTailGate(t *testing.T) {
	far := aectest.AgentSpeech(t)
	for _, rt := range []time.Duration{300 * time.Millisecond, 500 * time.Millisecond} {
		path := aectest.Laptop()
		path.RT60 = rt
		worst := func(c aec.Canceller) (tail measure.Tail, onset measure.Onset, pauses int) {
			r, err := measure.Run(c, measure.Scene{Far: far, Path: path, Hint: path.Delay})
			if err != nil {
				t.Fatal(err)
			}
			tails := measure.Tails(far, r.Mic, r.Out, path.Delay)
			onsets := measure.Onsets(far, r.Mic, r.Out, path.Delay)
			if len(tails) < 3 || len(onsets) < 3 {
				t.Fatalf("%d pauses and %d onsets after them in the agent's speech", len(tails), len(onsets))
			}
			tail, onset = tails[0], onsets[0]
			for _, tl := range tails {
				if tl.ERLE() < tail.ERLE() {
					tail = tl
				}
			}
			for _, o := range onsets {
				if o.ERLE() < onset.ERLE() {
					onset = o
				}
			}
			return tail, onset, len(tails)
		}
		without, withoutOnset, n := worst(newCanceller(t, webrtcapm.Config{}))
		g, err := aec.NewTailGate(newCanceller(t, webrtcapm.Config{}), aec.TailConfig{})
		if err != nil {
			t.Fatal(err)
		}
		with, withOnset, _ := worst(g)
		t.Logf("RT60 %v, %d pauses: the worst tail's ERLE %.1f dB (at %v, the tail %.1f dB below the echo before it) without the gate, %.1f dB (at %v) with it",
			rt, n, without.ERLE(), without.At, without.Before-without.Echo, with.ERLE(), with.At)
		t.Logf("RT60 %v: the worst onset's ERLE %.1f dB (at %v) without the gate, %.1f dB (at %v) with it",
			rt, withoutOnset.ERLE(), withoutOnset.At, withOnset.ERLE(), withOnset.At)
		if with.ERLE() < measure.Target {
			t.Errorf("RT60 %v: a tail's ERLE %.1f dB at %v with the gate, want ≥ %g", rt, with.ERLE(), with.At, measure.Target)
		}
		if withOnset.ERLE() < measure.Target {
			t.Errorf("RT60 %v: an onset's ERLE %.1f dB at %v with the gate, want ≥ %g", rt, withOnset.ERLE(), withOnset.At, measure.Target)
		}
	}
}

// TestDoubleTalkOnset: a user who starts speaking over the agent, as loud as its echo,
// keeps more of their first 300 ms with DoubleTalk than with the library's suppressor,
// which is what lets the VAD hear a barge-in's first word.
func TestDoubleTalkOnset(t *testing.T) {
	far := aectest.AgentSpeech(t)
	near := aectest.Recording(t, "jfk.wav")
	path := aectest.Laptop()
	const at = 5 * time.Second
	onset := func(s webrtcapm.Suppressor) float64 {
		r, err := measure.Run(newCanceller(t, webrtcapm.Config{Suppressor: s}), measure.Scene{Far: far, Near: near, NearAt: at, Path: path, Hint: path.Delay})
		if err != nil {
			t.Fatal(err)
		}
		from := int(at.Seconds() * aec.Rate)
		to := from + 3*aec.Rate/10
		var out, mic float64
		for i := from; i < to && i < len(r.Out); i++ {
			out += float64(r.Out[i]) * float64(r.Out[i])
			mic += float64(r.Mic[i]) * float64(r.Mic[i])
		}
		return 10 * math.Log10(out/mic)
	}
	library, tuned := onset(webrtcapm.LibrarySuppressor()), onset(DoubleTalk())
	t.Logf("the first 300 ms of double talk, output against microphone: %.1f dB with the library's suppressor, %.1f dB with DoubleTalk", library, tuned)
	if tuned < library+6 {
		t.Errorf("DoubleTalk keeps %.1f dB of the voice's onset, the library's suppressor %.1f dB: want 6 dB more", tuned, library)
	}
}
