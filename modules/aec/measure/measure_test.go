package measure

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/modules/aec"
)

// Reference cancellers with known answers, to check the measurements themselves (the
// real engines are measured in aec/webrtc and aec/speex).

// passThrough cancels nothing, with a latency of lat samples.
type passThrough struct{ buf []float32 }

func newPassThrough(lat int) *passThrough { return &passThrough{buf: make([]float32, lat)} }

func (p *passThrough) Render([]float32) error { return nil }
func (p *passThrough) Capture(near []float32) ([]float32, error) {
	p.buf = append(p.buf, near...)
	out := append([]float32(nil), p.buf[:len(near)]...)
	p.buf = p.buf[len(near):]
	return out, nil
}
func (p *passThrough) SetDelay(time.Duration) {}
func (p *passThrough) Latency() time.Duration {
	return time.Duration(len(p.buf)) * time.Second / aec.Rate
}
func (p *passThrough) Stats() aec.Stats { return aec.Stats{} }
func (p *passThrough) Close() error     { return nil }

// subtractor knows the far end and subtracts its exact echo, leaving a residual
// attenuated by residualDB.
type subtractor struct {
	path       *room.Path
	far        []float32
	residualDB float64
}

func (s *subtractor) Render(far []float32) error { s.far = append(s.far, far...); return nil }
func (s *subtractor) Capture(near []float32) ([]float32, error) {
	echo := s.path.Process(s.far[:len(near)])
	s.far = s.far[len(near):]
	g := float32(math.Pow(10, -s.residualDB/20))
	out := make([]float32, len(near))
	for i := range near {
		out[i] = near[i] - (1-g)*echo[i]
	}
	return out, nil
}
func (s *subtractor) SetDelay(time.Duration) {}
func (s *subtractor) Latency() time.Duration { return 0 }
func (s *subtractor) Stats() aec.Stats       { return aec.Stats{} }
func (s *subtractor) Close() error           { return nil }

// bursts is a far end of noise bursts (0.4 s on, 0.2 s off), 10 s long.
func bursts(seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, 10*aec.Rate)
	for i := range x {
		if i%(aec.Rate*6/10) < aec.Rate*4/10 {
			x[i] = float32(0.1 * rng.NormFloat64())
		}
	}
	return x
}

func laptop() room.Config {
	return room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Seed: 3}
}

func TestPassThrough(t *testing.T) {
	r, err := Run(newPassThrough(160), Scene{Far: bursts(1), Path: laptop()})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.ERLE) > 0.01 || r.Converged || r.AboveTarget != 0 {
		t.Fatalf("cancelling nothing measured as %v", r)
	}
}

// TestKnownERLE: a canceller that leaves exactly 30 dB of the echo is measured at
// 30 dB from the first window on.
func TestKnownERLE(t *testing.T) {
	path, _ := room.New(laptop())
	r, err := Run(&subtractor{path: path, residualDB: 30}, Scene{Far: bursts(2), Path: laptop()})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.ERLE-30) > 0.01 || math.Abs(r.ERLEMedian-30) > 0.01 || !r.Converged || r.Convergence != 0 || r.AboveTarget != 1 {
		t.Fatalf("a 30 dB canceller measured as %v", r)
	}
}

// TestDoubleTalkKnown: a perfect subtractor keeps the near end exactly (0 dB
// attenuation, correlation 1); cancelling nothing leaves the microphone's figures.
func TestDoubleTalkKnown(t *testing.T) {
	near := bursts(4)[:4*aec.Rate]
	scene := Scene{Far: bursts(5), Near: near, NearAt: 3 * time.Second, Path: laptop()}
	path, _ := room.New(laptop())
	r, err := Run(&subtractor{path: path, residualDB: 200}, scene)
	if err != nil {
		t.Fatal(err)
	}
	d := r.DoubleTalk
	if d.Windows == 0 || math.Abs(d.NearAttenuation) > 0.01 || d.Correlation < 0.9999 || d.NearToRestOut < 60 {
		t.Fatalf("a perfect canceller in double talk measured as %+v", d)
	}
	r, err = Run(newPassThrough(0), scene)
	if err != nil {
		t.Fatal(err)
	}
	d = r.DoubleTalk
	if math.Abs(d.NearToRestOut-d.NearToRestMic) > 0.01 || math.Abs(d.Correlation-d.CorrelationInput) > 1e-6 {
		t.Fatalf("cancelling nothing changed the double-talk figures: %+v", d)
	}
}

func TestSceneErrors(t *testing.T) {
	for _, s := range []Scene{
		{},
		{Far: bursts(1), Path: room.Config{GainDB: 5}},
		{Far: bursts(1), Path: room.Config{Rate: 8000}},
		{Far: bursts(1), Near: bursts(2), NearAt: time.Hour},
		{Far: bursts(1), Near: make([]float32, 100), NearAt: time.Second, Path: laptop()},
		{Far: make([]float32, 1000), Near: bursts(2), Path: laptop()},
	} {
		if _, err := Run(newPassThrough(0), s); err == nil {
			t.Errorf("scene %+v accepted", s.Path)
		}
	}
}

// TestMicClock: on a microphone whose clock runs fast (slow), a click the speaker plays
// at second k is taken k·ppm microseconds later (earlier) in the microphone's samples.
func TestMicClock(t *testing.T) {
	x := make([]float32, 10*aec.Rate)
	for k := 1; k < 10; k++ {
		x[k*aec.Rate] = 1
	}
	for _, ppm := range []int{1000, -1000, 5000} {
		y, err := onMicClock(x, ppm)
		if err != nil {
			t.Fatal(err)
		}
		if len(y) != len(x) {
			t.Fatalf("%+d ppm: %d samples from %d", ppm, len(y), len(x))
		}
		for k := 1; k < 10; k++ {
			want := float64(k*aec.Rate) * (1 + float64(ppm)/1e6)
			at := int(math.Round(want))
			peak := at - 3
			for i := at - 3; i <= at+3; i++ {
				if y[i] > y[peak] {
					peak = i
				}
			}
			if math.Abs(float64(peak)-want) > 0.5 {
				t.Errorf("%+d ppm: click %d at sample %d, want %.1f", ppm, k, peak, want)
			}
		}
	}
	if _, err := Run(newPassThrough(0), Scene{Far: bursts(1), Path: laptop(), MicClockPPM: 200_000}); err == nil {
		t.Error("a microphone clock 20 % fast was accepted")
	}
}

// The scenes of TestTails and TestOnsets: their rate and echo delay (sceneD in samples).
const (
	sceneRate  = 16000
	sceneDelay = 30 * time.Millisecond
	sceneD     = sceneRate * 30 / 1000
)

// newStepScene returns 3 s of a far end at 0.1 wherever sounds says (at each time in
// seconds), its echo at half of it sceneDelay later, and an output of silence.
func newStepScene(sounds func(s float64) bool) (far, echo, out []float32) {
	far = make([]float32, 3*sceneRate)
	echo = make([]float32, 3*sceneRate)
	out = make([]float32, 3*sceneRate)
	for i := range far {
		if sounds(float64(i) / sceneRate) {
			far[i] = 0.1
		}
	}
	for i := sceneD; i < len(echo); i++ {
		echo[i] = far[i-sceneD] / 2
	}
	return far, echo, out
}

// TestTails: a far end with two pauses, an echo path that rings on after them, and a
// canceller that leaves a known part of that ringing: the tails are found where the
// echo stopped and measured.
func TestTails(t *testing.T) {
	const rate, delay = sceneRate, sceneDelay
	// Sound 0–0.5 s and 1–1.5 s (a 50 ms gap inside the second: no pause), silence after.
	far, echo, out := newStepScene(func(s float64) bool {
		return s < 0.5 || (s >= 1 && s < 1.5 && (s < 1.2 || s >= 1.25))
	})
	for i := sceneD; i < len(echo); i++ {
		if echo[i] == 0 && i < 2*rate {
			echo[i] = 0.005 // the room rings: 20 dB below the echo
			out[i] = 0.0005 // and the canceller took 20 dB of that
		}
	}
	tails := Tails(far, echo, out, delay)
	if len(tails) != 2 {
		t.Fatalf("%d tails, want 2: %+v", len(tails), tails)
	}
	for i, want := range []time.Duration{500*time.Millisecond + delay, 1500*time.Millisecond + delay} {
		tl := tails[i]
		if tl.At != want || math.Abs(tl.Before-20*math.Log10(0.05)) > 0.01 || math.Abs(tl.Echo-tl.Before+20) > 0.01 || math.Abs(tl.ERLE()-20) > 0.01 {
			t.Errorf("tail %d: %+v (ERLE %.2f dB), want at %v, echo %.2f dBFS before, 20 dB less after, ERLE 20 dB", i, tl, tl.ERLE(), want, 20*math.Log10(0.05))
		}
	}
}

// TestOnsets: a far end that starts, pauses twice (500 ms, then a 50 ms gap that is no
// pause) and goes on, and a canceller that leaves a tenth of the echo's first 20 ms
// after the pause: the one onset is found where the echo begins again and measured over
// OnsetLen.
func TestOnsets(t *testing.T) {
	const rate, delay = sceneRate, sceneDelay
	// Sound 0–0.5 s and 1–2 s with a 50 ms gap at 1.5 s.
	far, echo, out := newStepScene(func(s float64) bool {
		return s < 0.5 || (s >= 1 && s < 2 && (s < 1.5 || s >= 1.55))
	})
	begins := rate + sceneD
	for i := begins; i < begins+rate*20/1000; i++ {
		out[i] = echo[i] * float32(math.Sqrt(0.1))
	}
	onsets := Onsets(far, echo, out, delay)
	if len(onsets) != 1 {
		t.Fatalf("%d onsets, want 1: %+v", len(onsets), onsets)
	}
	// Half of the 40 ms holds a tenth of the echo: 13 dB.
	o, want := onsets[0], 10*math.Log10(1/(0.1*20/40))
	if o.At != time.Second+delay || math.Abs(o.Echo-20*math.Log10(0.05)) > 0.01 || math.Abs(o.ERLE()-want) > 0.01 {
		t.Errorf("%+v (ERLE %.2f dB), want at %v, echo %.2f dBFS, ERLE %.2f dB", o, o.ERLE(), time.Second+delay, 20*math.Log10(0.05), want)
	}
}
