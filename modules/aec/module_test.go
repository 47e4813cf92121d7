package aec

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap/zaptest"
)

// early is how much earlier than its timing says the module renders played audio: the
// oracle's delay from render to capture is that much longer than the acoustic path.
var early = int(audio.DurationToSamples(earlyBy, Rate))

// subtractor is an oracle engine: it knows the echo path (a gain after a delay, in
// samples, from render to capture) and removes the echo exactly — if, and only if, it
// is given the reference in step with the capture, as the module must. The real
// engines are tested through aec/webrtc, aec/speex and pipeline.
type subtractor struct {
	delay int
	gain  float32
	// estimates: Stats reports delay as the engine's delay estimate, as AEC3 does once
	// it found the echo (an oracle's estimate never moves).
	estimates bool
	far       []float32 // everything rendered
	n         int       // capture samples processed
	ahead     int       // capture samples processed before their reference was rendered
}

func (s *subtractor) FrameSize() int { return 160 }
func (s *subtractor) ProcessRender(far []float32) error {
	s.far = append(s.far, far...)
	return nil
}
func (s *subtractor) ProcessCapture(near []float32) error {
	for i := range near {
		if s.n+i >= len(s.far) {
			s.ahead++
		}
		if j := s.n + i - s.delay; j >= 0 && j < len(s.far) {
			near[i] -= s.gain * s.far[j]
		}
	}
	s.n += len(near)
	return nil
}
func (s *subtractor) SetStreamDelay(time.Duration) {}
func (s *subtractor) Latency() time.Duration       { return 0 }
func (s *subtractor) Stats() Stats {
	if !s.estimates {
		return Stats{}
	}
	return Stats{Delay: Duration{D: audio.SamplesToDuration(int64(s.delay), Rate), OK: true}}
}
func (s *subtractor) Close() error { return nil }

// played is a test Played payload.
type played struct {
	f     audio.Frame
	heard time.Time
}

func (p played) Kind() string                          { return "played" }
func (p played) Summary() string                       { return p.f.Summary() }
func (p played) PlayedAudio() (audio.Frame, time.Time) { return p.f, p.heard }

func noise(n int, seed uint64, amp float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * rng.NormFloat64())
	}
	return x
}

// scene is a microphone hearing a user (near) and the speaker's echo.
type scene struct {
	near   []float32 // the user at the microphone
	far    []float32 // the played stream, from the speaker's first sample on
	outLat time.Duration
	// micStart is when the microphone captured its sample 0, after the network
	// started; stamped is whether its frames say so (a live microphone) or not (a
	// recording, whose sample 0 is at the start).
	micStart time.Duration
	stamped  bool
	acoustic int // samples from hearing to the microphone
	gain     float32
	frame    int // microphone frame length
	chunk    int // played IU length
	gapAt    int // a gap of gapLen samples in the microphone's frames at this position (0: none)
	gapLen   int
	stopAt   time.Duration // the speaker stops sending here (0: never)
	jitter   time.Duration // stamped capture times are off by up to this much
	// settle: the stamped capture times start this much late and come right linearly
	// over settleOver samples (a live microphone's clock estimate settling).
	settle     time.Duration
	settleOver int
	// From microphone position slipAt on, its samples are captured slip later than the
	// positions say (samples lost uncounted), and its stamps say so.
	slipAt int
	slip   time.Duration
	// leadSilence is how many samples of the played stream are silence.
	leadSilence int
	// From played sample latJumpAt on, the output's latency is latJump longer (its
	// buffer grew): those samples are heard, and echo, that much later, and the played
	// IUs' timing says so.
	latJumpAt int
	latJump   time.Duration
	// outPPM and micPPM are how much faster than the system's clock the output's and the
	// microphone's run, in parts per million: the output plays, and the microphone
	// takes, that many more samples per million of the system's time.
	outPPM, micPPM int
}

// atRate returns how long n samples last on a clock ppm parts per million fast.
func atRate(n int, ppm int) time.Duration {
	if ppm == 0 {
		return audio.SamplesToDuration(int64(n), Rate)
	}
	return time.Duration(float64(n) / (Rate * (1 + float64(ppm)/1e6)) * float64(time.Second))
}

// capturedAt returns when microphone position t is captured (without the slip).
func (sc scene) capturedAt(t int) time.Duration { return sc.micStart + atRate(t, sc.micPPM) }

// heardAt returns when played sample j is heard, after the speaker started.
func (sc scene) heardAt(j int) time.Duration {
	d := sc.outLat + atRate(j, sc.outPPM)
	if sc.latJump > 0 && j >= sc.latJumpAt {
		d += sc.latJump
	}
	return d
}

// mic returns the microphone's signal: the user plus the echo of what was heard
// acoustic samples earlier.
func (sc scene) mic() []float32 {
	x := append([]float32(nil), sc.near...)
	for t, j := range sc.echoes() {
		if j >= 0 {
			x[t] += sc.gain * sc.far[j]
		}
	}
	return x
}

// echoes returns, for each microphone position, the played sample whose echo it holds
// (-1: none). Played sample j is heard at heardAt(j); microphone position t is captured
// at micStart + t (slip later from slipAt on) and holds the echo of what was heard
// acoustic samples before.
func (sc scene) echoes() []int {
	idx := make([]int, len(sc.near))
	for t := range idx {
		idx[t] = -1
	}
	slip := int(audio.DurationToSamples(sc.slip, Rate))
	for j := range sc.far {
		t := int(audio.DurationToSamples(sc.heardAt(j)-sc.micStart, Rate)) + sc.acoustic
		if sc.micPPM != 0 {
			t = int(math.Floor((sc.heardAt(j)-sc.micStart).Seconds()*Rate*(1+float64(sc.micPPM)/1e6))) + sc.acoustic
		}
		if slip > 0 && t-slip >= sc.slipAt {
			t -= slip
		}
		if t >= 0 && t < len(idx) {
			idx[t] = j
		}
	}
	return idx
}

// runScene plays the scene through the module on a virtual clock and returns its output
// frames and whether the end of the stream was passed on.
func runScene(t *testing.T, sc scene, eng Engine, cfg Config) ([]audio.Frame, bool, *Module) {
	t.Helper()
	out, _, eos, m := runSceneLinear(t, sc, eng, cfg)
	return out, eos, m
}

// runSceneLinear is runScene that also returns the Linear IUs' audio, and checks that
// each comes just before the frame of the same stretch.
func runSceneLinear(t *testing.T, sc scene, eng Engine, cfg Config) ([]audio.Frame, []audio.Frame, bool, *Module) {
	t.Helper()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(start)
	defer v.Close()
	mic := sc.mic()
	rng := rand.New(rand.NewPCG(7, 7))
	src := iu.ModuleFunc{ModuleName: "mic", Fn: func(ctx context.Context, p *iu.Ports) error {
		for pos := 0; pos < len(mic); pos += sc.frame {
			end := min(pos+sc.frame, len(mic))
			if err := wait(ctx, p, start.Add(sc.capturedAt(end))); err != nil {
				return err
			}
			if sc.gapLen > 0 && pos >= sc.gapAt && pos < sc.gapAt+sc.gapLen {
				continue // a dropped capture block
			}
			f := audio.Frame{Samples: mic[pos:end], Rate: Rate, Channels: 1, Start: int64(pos)}
			if sc.stamped {
				f.Captured = start.Add(sc.capturedAt(pos))
				if sc.jitter > 0 {
					f.Captured = f.Captured.Add(time.Duration(rng.Int64N(int64(2*sc.jitter))) - sc.jitter)
				}
				if sc.slip > 0 && pos >= sc.slipAt {
					f.Captured = f.Captured.Add(sc.slip)
				}
				if pos < sc.settleOver {
					f.Captured = f.Captured.Add(sc.settle * time.Duration(sc.settleOver-pos) / time.Duration(sc.settleOver))
				}
			}
			u := p.NewIU(f)
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		u := p.NewIU(audio.EndOfStream{Pos: int64(len(mic)), Rate: Rate})
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
	spk := iu.ModuleFunc{ModuleName: "speaker", Fn: func(ctx context.Context, p *iu.Ports) error {
		for j := 0; j < len(sc.far); j += sc.chunk {
			end := min(j+sc.chunk, len(sc.far))
			at := audio.SamplesToDuration(int64(end), Rate)
			if sc.stopAt > 0 && at > sc.stopAt {
				break
			}
			if err := wait(ctx, p, start.Add(at)); err != nil {
				return err
			}
			f := audio.Frame{Samples: sc.far[j:end], Rate: Rate, Channels: 1, Start: int64(j)}
			u := p.NewIU(played{f: f, heard: start.Add(sc.heardAt(j))})
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	}}
	c, err := NewStream(eng)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := New("aec", cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out, linear []audio.Frame
	eos := false
	sink := iu.ModuleFunc{ModuleName: "vad", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == iu.EventInputDone {
				return err
			}
			for _, up := range ev.Message.Updates {
				mu.Lock()
				switch pl := up.IU.Payload.(type) {
				case Linear:
					if up.Type == iu.Add {
						if len(linear) != len(out) {
							t.Errorf("linear audio %s after another", pl.Summary())
						}
						linear = append(linear, pl.LinearAudio())
					}
				case audio.Frame:
					if up.Type == iu.Add {
						if eos {
							t.Errorf("frame %s after the end of the stream", pl.Summary())
						}
						if n := len(linear); n > 0 && (n != len(out)+1 || linear[n-1].Start != pl.Start || linear[n-1].Len() != pl.Len()) {
							t.Errorf("frame %s without the linear audio of its stretch before it", pl.Summary())
						}
						out = append(out, pl)
					}
				case audio.EndOfStream:
					eos = up.Type == iu.Add || eos
				}
				mu.Unlock()
			}
		}
	}}
	net := iu.NewNetwork(iu.WithClock(v), iu.WithLogger(zaptest.NewLogger(t)))
	if err := net.Add(src, spk, m, sink); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"mic", "aec"}, {"speaker", "aec"}, {"aec", "vad"}} {
		if err := net.ConnectNames(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return out, linear, eos, m
}

func wait(ctx context.Context, p *iu.Ports, until time.Time) error {
	for p.Now().Before(until) {
		if _, err := p.Next(ctx, until); err != nil {
			return err
		}
	}
	return nil
}

// joined checks that frames are contiguous from 0 and returns their samples.
func joined(t *testing.T, frames []audio.Frame) []float32 {
	t.Helper()
	var all []float32
	for i, f := range frames {
		if f.Start != int64(len(all)) || f.Rate != Rate || f.Channels != 1 {
			t.Fatalf("output frame %d is %s after %d samples", i, f.Summary(), len(all))
		}
		all = append(all, f.Samples...)
	}
	return all
}

// cancelWithOracle plays sc through the module with the oracle engine, which removes
// the echo exactly when the reference reaches it in step, and returns the output, as
// long as the input.
func cancelWithOracle(t *testing.T, sc scene) []float32 {
	t.Helper()
	out, _, _ := runScene(t, sc, &subtractor{delay: sc.acoustic + early, gain: sc.gain}, Config{})
	got := joined(t, out)
	if len(got) != len(sc.near) {
		t.Fatalf("%d samples out of %d", len(got), len(sc.near))
	}
	return got
}

// TestModuleAlignsReference: whatever the frame sizes, output latency and microphone
// clock, the oracle removes the echo exactly, which it can only do when every played
// sample reaches it in step with the capture; the output is the user's voice on the
// microphone's timeline, as long as the input, followed by the end of the stream.
func TestModuleAlignsReference(t *testing.T) {
	const n = 3 * Rate
	near := noise(n, 1, 0.1)
	far := noise(n+Rate, 2, 0.3)
	for _, sc := range []scene{
		{frame: 320, chunk: 160, acoustic: 480},
		{frame: 320, chunk: 160, acoustic: 480, outLat: 50 * time.Millisecond},
		{frame: 333, chunk: 77, acoustic: 17, outLat: 30 * time.Millisecond},
		{frame: 160, chunk: 800, acoustic: 0, outLat: 100 * time.Millisecond},
		// A live microphone that started late, its frames stamped with capture times.
		{frame: 320, chunk: 160, acoustic: 160, outLat: 50 * time.Millisecond, micStart: 137 * time.Millisecond, stamped: true},
		// Its timing jitters: the reference is placed by the average while it is
		// silent, and then stays in place.
		{frame: 320, chunk: 160, acoustic: 160, outLat: 50 * time.Millisecond, micStart: 37 * time.Millisecond, stamped: true, jitter: 15 * time.Millisecond, leadSilence: Rate},
	} {
		sc.near, sc.far, sc.gain = near, far, 0.5
		if sc.leadSilence > 0 {
			sc.far = append(make([]float32, sc.leadSilence), far[sc.leadSilence:]...)
		}
		t.Run(fmt.Sprintf("frame %d chunk %d lat %v mic %v", sc.frame, sc.chunk, sc.outLat, sc.micStart), func(t *testing.T) {
			eng := &subtractor{delay: sc.acoustic + early, gain: sc.gain}
			out, eos, m := runScene(t, sc, eng, Config{})
			got := joined(t, out)
			if len(got) != n || !eos {
				t.Fatalf("%d samples out of %d, end of stream passed on: %v", len(got), n, eos)
			}
			if sc.jitter > 0 {
				checkConstantMisalignment(t, sc, got, 4*time.Millisecond)
				return
			}
			// (The echo in the first samples may be of audio played before the
			// microphone's start, where the module does not render it.)
			for i := range got {
				if math.Abs(float64(got[i]-near[i])) > 1e-5 && i >= sc.acoustic+early {
					t.Fatalf("output sample %d = %g, the user said %g (echo %g)", i, got[i], near[i], sc.mic()[i]-near[i])
				}
			}
			if eng.ahead > 0 {
				t.Errorf("%d samples captured before their reference was rendered", eng.ahead)
			}
			if sc.stamped && sc.jitter == 0 {
				for i, f := range out {
					want := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(sc.micStart + audio.SamplesToDuration(f.Start, Rate))
					if !f.Captured.Equal(want) {
						t.Fatalf("output frame %d (%s) captured at %v, want %v", i, f.Summary(), f.Captured, want)
					}
				}
			}
			if c := m.Cost(); c.Audio != audio.SamplesToDuration(n+160, Rate) || c.Processing <= 0 {
				t.Errorf("cost %+v", c)
			}
		})
	}
}

// checkConstantMisalignment checks that the output is the user's voice plus what is left
// when the echo is cancelled with a reference misplaced by a constant number of samples
// (at most maxMisplaced): the reference was placed once and never moved.
func checkConstantMisalignment(t *testing.T, sc scene, got []float32, maxMisplaced time.Duration) {
	t.Helper()
	shift := int(audio.DurationToSamples(sc.micStart-sc.outLat, Rate)) - sc.acoustic
	far := func(j int) float32 {
		if j < 0 || j >= len(sc.far) {
			return 0
		}
		return sc.far[j]
	}
	maxErr := int(audio.DurationToSamples(maxMisplaced, Rate))
	from := int(audio.DurationToSamples(sc.jitter, Rate))
	for e := -maxErr; e <= maxErr; e++ {
		ok := true
		for i := from; i < len(got) && ok; i++ {
			want := sc.near[i] + sc.gain*(far(i+shift)-far(i+shift+e))
			ok = math.Abs(float64(got[i]-want)) < 1e-5
		}
		if ok {
			t.Logf("reference misplaced by %d samples throughout", e)
			return
		}
	}
	t.Fatal("the output is not the echo cancelled with a reference in one constant place")
}

// TestModuleFollowsTheOutputsLatency: when the output's latency grows mid-stream (a
// sound server's buffer after an underrun), the echo comes later and the played IUs'
// timing says so; the module moves the reference with it, so that the engine's echo
// path stays the same: the oracle cancels exactly again right after the change.
func TestModuleFollowsTheOutputsLatency(t *testing.T) {
	const n = 3 * Rate
	sc := scene{near: noise(n, 8, 0.1), far: noise(n, 9, 0.3), gain: 0.5, frame: 320, chunk: 160, acoustic: 320,
		outLat: 50 * time.Millisecond, latJumpAt: Rate, latJump: 120 * time.Millisecond}
	got := cancelWithOracle(t, sc)
	// The change reaches the microphone at about 1.17 s; the module knows after
	// moveAgree IUs.
	change := int(audio.DurationToSamples(sc.heardAt(sc.latJumpAt), Rate)) + sc.acoustic
	settle := change + int(audio.DurationToSamples(100*time.Millisecond, Rate))
	for i := range got {
		if i >= sc.acoustic+early && (i < change-int(audio.DurationToSamples(sc.latJump, Rate)) || i >= settle) &&
			math.Abs(float64(got[i]-sc.near[i])) > 1e-5 {
			t.Fatalf("output sample %d (%.3f s) = %g, the user said %g", i, float64(i)/Rate, got[i], sc.near[i])
		}
	}
}

// TestModuleIgnoresTheMicrophonesClockSettling: a live microphone's capture times
// start late and settle over seconds (its clock estimate finds earlier stamps), while
// the echo stays where it was in its samples. The reference is placed once, by the
// estimate at the first sound, and stays there: misplaced by a constant, which an
// engine's delay estimator absorbs; moving it with the estimate would have the engine
// adapt anew each time. Seen live: 35 ms over 5 s, and under load 165–190 ms over 4–5 s
// (a backlog of captured audio draining).
func TestModuleIgnoresTheMicrophonesClockSettling(t *testing.T) {
	for _, tc := range []struct {
		settle time.Duration
		over   int // samples
	}{
		{24 * time.Millisecond, 3 * Rate}, // 16 ms still to settle when the agent speaks
		{190 * time.Millisecond, 4 * Rate},
	} {
		t.Run(tc.settle.String(), func(t *testing.T) {
			n := tc.over + 2*Rate
			sc := scene{near: noise(n, 10, 0.1), gain: 0.5, frame: 320, chunk: 160, acoustic: 160,
				outLat: 50 * time.Millisecond, micStart: 40 * time.Millisecond, stamped: true,
				settle: tc.settle, settleOver: tc.over, leadSilence: Rate}
			// The agent speaks after a second, while the estimate still settles.
			sc.far = append(make([]float32, sc.leadSilence), noise(n, 11, 0.3)...)
			got := cancelWithOracle(t, sc)
			checkConstantMisalignment(t, sc, got, sc.settle)
		})
	}
}

// TestModuleFollowsASlipAfterSettling: a slip after the clock settled by 150 ms is still
// followed, from the settled estimate: the reference is misplaced after the slip as it
// was before it. (The clock's average lags a settling estimate by up to 50 ms here and
// catches up over seconds; a slip while it does is followed from where it was.)
func TestModuleFollowsASlipAfterSettling(t *testing.T) {
	const n = 7 * Rate
	sc := scene{near: noise(n, 16, 0.1), gain: 0.5, frame: 320, chunk: 160, acoustic: 320,
		outLat: 50 * time.Millisecond, micStart: 40 * time.Millisecond, stamped: true,
		settle: 150 * time.Millisecond, settleOver: 2 * Rate, leadSilence: Rate,
		slipAt: 5 * Rate, slip: 40 * time.Millisecond}
	sc.far = append(make([]float32, sc.leadSilence), noise(n, 17, 0.3)...)
	got := cancelWithOracle(t, sc)
	maxErr := int(audio.DurationToSamples(sc.settle, Rate))
	before, ok := misplacedBy(sc, got, 5*Rate/2, sc.slipAt, maxErr)
	if !ok {
		t.Fatal("before the slip the reference is not in one place")
	}
	after, ok := misplacedBy(sc, got, sc.slipAt+3*Rate/2, n, maxErr)
	if !ok {
		t.Fatal("after the slip the reference is not in one place")
	}
	t.Logf("reference misplaced by %d samples before the slip, %d after", before, after)
	if d := after - before; d > int(audio.DurationToSamples(moveMin, Rate)) || -d > int(audio.DurationToSamples(moveMin, Rate)) {
		t.Errorf("the reference did not follow the slip: misplaced by %d samples before it, %d after", before, after)
	}
}

// misplacedBy finds the constant e by which the reference was misplaced over the output
// [from, to): the output is the user plus what subtracting played sample j+e from the
// echo of played sample j leaves.
func misplacedBy(sc scene, got []float32, from, to, maxErr int) (int, bool) {
	echo := sc.echoes()
	far := func(j int) float32 {
		if j < 0 || j >= len(sc.far) {
			return 0
		}
		return sc.far[j]
	}
	for e := -maxErr; e <= maxErr; e++ {
		ok := true
		for i := from; i < to && i < len(got) && ok; i++ {
			ok = echo[i] < 0 || math.Abs(float64(got[i]-sc.near[i]-sc.gain*(far(echo[i])-far(echo[i]+e)))) < 1e-5
		}
		if ok {
			return e, true
		}
	}
	return 0, false
}

// TestModuleFollowsTheMicrophonesClockSlip: when the microphone's samples slip (lost
// without a gap in its positions, 40 ms here), the echo comes that much earlier in its
// samples and its capture times say so; the reference follows, past epochMoveMin and
// then in moveMin steps while the clock's average catches up.
func TestModuleFollowsTheMicrophonesClockSlip(t *testing.T) {
	const n = 4 * Rate
	sc := scene{near: noise(n, 12, 0.1), far: noise(n+Rate, 13, 0.3), gain: 0.5, frame: 320, chunk: 160, acoustic: 320,
		outLat: 50 * time.Millisecond, micStart: 40 * time.Millisecond, stamped: true, slipAt: 2 * Rate, slip: 40 * time.Millisecond}
	got := cancelWithOracle(t, sc)
	for i := range got[:sc.slipAt] {
		if i >= sc.acoustic+early && math.Abs(float64(got[i]-sc.near[i])) > 1e-5 {
			t.Fatalf("output sample %d (%.3f s) = %g, the user said %g", i, float64(i)/Rate, got[i], sc.near[i])
		}
	}
	// A second and a half after the slip the reference is where the echo is, give or
	// take less than moveMin (it moved in steps that size while the clock's average
	// caught up): the output is what a subtraction of a reference misplaced by a
	// constant e leaves.
	echo, settled := sc.echoes(), sc.slipAt+3*Rate/2
	far := func(j int) float32 {
		if j < 0 || j >= len(sc.far) {
			return 0
		}
		return sc.far[j]
	}
	maxErr := int(audio.DurationToSamples(moveMin, Rate))
	for e := -maxErr; e <= maxErr; e++ {
		ok := true
		for i := settled; i < len(got) && ok; i++ {
			ok = echo[i] < 0 || math.Abs(float64(got[i]-sc.near[i]-sc.gain*(far(echo[i])-far(echo[i]+e)))) < 1e-5
		}
		if ok {
			t.Logf("after the slip, the reference misplaced by %d samples", e)
			return
		}
	}
	t.Fatal("the reference did not follow the microphone's slip")
}

// TestModuleLeavesALateSlipToTheEngine: a microphone's clock that moves later is seen
// late (its sliding minimum), when an engine with a delay estimator has long found the
// echo where it went; where its estimate has the echo far enough after the reference
// (100 ms of loopback here, a 40 ms slip), the reference stays put. Where it does not (the
// 10 ms of a laptop), the reference follows the clock.
func TestModuleLeavesALateSlipToTheEngine(t *testing.T) {
	const n = 4 * Rate
	slip := 40 * time.Millisecond
	for _, tc := range []struct {
		acoustic int
		follows  bool
	}{{acoustic: 1600, follows: false}, {acoustic: 160, follows: true}} {
		t.Run(fmt.Sprint(tc.acoustic), func(t *testing.T) {
			sc := scene{near: noise(n, 12, 0.1), far: noise(n+Rate, 13, 0.3), gain: 0.5, frame: 320, chunk: 160,
				acoustic: tc.acoustic, outLat: 50 * time.Millisecond, micStart: 40 * time.Millisecond, stamped: true,
				slipAt: 2 * Rate, slip: slip}
			out, _, _ := runScene(t, sc, &subtractor{delay: sc.acoustic + early, gain: sc.gain, estimates: true}, Config{})
			got := joined(t, out)
			maxErr := int(audio.DurationToSamples(2*slip, Rate))
			before, ok := misplacedBy(sc, got, Rate, sc.slipAt, maxErr)
			if !ok || before != 0 {
				t.Fatalf("before the slip the reference is misplaced by %d samples (found: %v)", before, ok)
			}
			after, ok := misplacedBy(sc, got, sc.slipAt+3*Rate/2, n, maxErr)
			if !ok {
				t.Fatal("after the slip the reference is not in one place")
			}
			step := int(audio.DurationToSamples(moveMin, Rate))
			followed := after > -step && after < step
			t.Logf("after the slip the reference is misplaced by %d samples", after)
			if followed != tc.follows {
				t.Errorf("the reference followed the slip: %v, want %v", followed, tc.follows)
			}
		})
	}
}

// TestModuleLeavesSmallOutputMovesToTheEngine: the output's timing moving a few ms is as
// often its jitter as the output's buffer; where the engine's delay estimate has the
// echo far enough after the reference, the reference stays put. A buffer that grows by
// more (30 ms) is followed, so that the engine sees its delay unchanged.
func TestModuleLeavesSmallOutputMovesToTheEngine(t *testing.T) {
	const n = 3 * Rate
	for _, tc := range []struct {
		jump    time.Duration
		follows bool
	}{{jump: 8 * time.Millisecond, follows: false}, {jump: 30 * time.Millisecond, follows: true}} {
		t.Run(tc.jump.String(), func(t *testing.T) {
			sc := scene{near: noise(n, 8, 0.1), far: noise(n, 9, 0.3), gain: 0.5, frame: 320, chunk: 160, acoustic: 1600,
				outLat: 50 * time.Millisecond, latJumpAt: Rate, latJump: tc.jump}
			out, _, _ := runScene(t, sc, &subtractor{delay: sc.acoustic + early, gain: sc.gain, estimates: true}, Config{})
			got := joined(t, out)
			change := int(audio.DurationToSamples(sc.heardAt(sc.latJumpAt), Rate)) + sc.acoustic
			after, ok := misplacedBy(sc, got, change+Rate/2, n, int(audio.DurationToSamples(2*tc.jump, Rate)))
			if !ok {
				t.Fatal("after the move the reference is not in one place")
			}
			t.Logf("after the move the reference is misplaced by %d samples", after)
			if followed := after == 0; followed != tc.follows {
				t.Errorf("the reference followed the output: %v, want %v", followed, tc.follows)
			}
		})
	}
}

// TestModuleBridgesGaps: a dropped capture block becomes silence on the output's
// timeline, and the reference stays in step after it.
func TestModuleBridgesGaps(t *testing.T) {
	const n = 2 * Rate
	sc := scene{near: noise(n, 3, 0.1), far: noise(n+Rate, 4, 0.3), gain: 0.5, frame: 320, chunk: 160, acoustic: 320,
		outLat: 20 * time.Millisecond, gapAt: 9600, gapLen: 640}
	got := cancelWithOracle(t, sc)
	for i := range got {
		want := sc.near[i]
		if i >= sc.gapAt && i < sc.gapAt+sc.gapLen {
			want = -sc.gain * sc.far[i-sc.acoustic-320] // the echo's reference is still subtracted
		}
		if math.Abs(float64(got[i]-want)) > 1e-5 {
			t.Fatalf("output sample %d = %g, want %g", i, got[i], want)
		}
	}
}

// TestModuleWithoutReference: when the speaker stops sending played audio, the
// microphone's frames go on after MaxWait, with silence for reference.
func TestModuleWithoutReference(t *testing.T) {
	const n = 2 * Rate
	sc := scene{near: noise(n, 5, 0.1), far: make([]float32, 3*Rate), frame: 320, chunk: 160, stopAt: time.Second}
	out, eos, _ := runScene(t, sc, &subtractor{}, Config{MaxWait: 50 * time.Millisecond})
	got := joined(t, out)
	if len(got) != n || !eos {
		t.Fatalf("%d samples out of %d, end of stream %v", len(got), n, eos)
	}
	for i := range got {
		if math.Abs(float64(got[i]-sc.near[i])) > 1e-6 {
			t.Fatalf("output sample %d = %g, want %g", i, got[i], sc.near[i])
		}
	}
}

// linearSubtractor is the oracle with a linear output: the microphone as it came.
type linearSubtractor struct{ subtractor }

func (s *linearSubtractor) ProcessCaptureLinear(near, linear []float32) error {
	copy(linear, near)
	return s.ProcessCapture(near)
}

// TestModuleLinearOutput: with a LinearCanceller the module sends, before each frame of
// cleaned audio, the linear output of the same stretch, on the same timeline.
func TestModuleLinearOutput(t *testing.T) {
	const n = 2 * Rate
	sc := scene{near: noise(n, 3, 0.1), far: noise(n+Rate, 4, 0.3), gain: 0.5, frame: 320, chunk: 160, acoustic: 320,
		outLat: 20 * time.Millisecond}
	out, linear, eos, _ := runSceneLinear(t, sc, &linearSubtractor{subtractor{delay: sc.acoustic + early, gain: sc.gain}}, Config{})
	got, lin := joined(t, out), joined(t, linear)
	if len(got) != n || len(lin) != n || !eos {
		t.Fatalf("%d and %d samples out of %d, end of stream %v", len(got), len(lin), n, eos)
	}
	mic := sc.mic()
	for i := range got {
		if math.Abs(float64(got[i]-sc.near[i])) > 1e-5 || lin[i] != mic[i] {
			t.Fatalf("sample %d: cleaned %g, linear %g; want %g and %g", i, got[i], lin[i], sc.near[i], mic[i])
		}
	}
}

func TestModuleRejects(t *testing.T) {
	if _, err := New("aec", Config{}, nil); err == nil {
		t.Error("no canceller accepted")
	}
	c, err := NewStream(&subtractor{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New("aec", Config{MaxWait: -time.Second}, c); err == nil {
		t.Error("negative max wait accepted")
	}
}

// misplacements returns the least and the most by which the reference was misplaced
// over the output [from, to): at each sample that holds an echo, the e for which the
// output is the user plus what subtracting played sample j+e from the echo of played
// sample j leaves (searched from the previous sample's e outward, up to maxErr), or
// where the reference held silence.
func misplacements(sc scene, got []float32, from, to, maxErr int) (lo, hi int, ok bool) {
	echo := sc.echoes()
	far := func(j int) float32 {
		if j < 0 || j >= len(sc.far) {
			return 0
		}
		return sc.far[j]
	}
	e, seen := 0, false
	for i := from; i < to && i < len(got); i++ {
		if echo[i] < 0 {
			continue
		}
		if math.Abs(float64(got[i]-sc.near[i]-sc.gain*far(echo[i]))) < 1e-5 {
			continue // the reference is silence here: the gap a move later leaves
		}
		found := false
		for k := 0; k <= 2*maxErr+1 && !found; k++ {
			c := e + (k+1)/2*(1-2*(k%2)) // e, e-1, e+1, e-2, …
			if c < -maxErr || c > maxErr {
				continue
			}
			if math.Abs(float64(got[i]-sc.near[i]-sc.gain*(far(echo[i])-far(echo[i]+c)))) < 1e-5 {
				e, found = c, true
			}
		}
		if !found {
			return lo, hi, false
		}
		if !seen {
			lo, hi, seen = e, e, true
		}
		lo, hi = min(lo, e), max(hi, e)
	}
	return lo, hi, seen
}

// TestModuleDriftingClocks: device clocks that run fast or slow against the system's.
// A laptop's output and microphone share one crystal: both clocks drift alike, the
// echo stays where it is in the microphone's samples, and so does the reference. A
// microphone of its own that drifts moves the echo, and the reference follows it
// within epochMoveMin; an output that drifts alone is followed within moveMin. The
// drifts are 1000 ppm, ten times a poor device's, so that a scene of seconds shows
// them (1 ms a second).
func TestModuleDriftingClocks(t *testing.T) {
	ms := func(d time.Duration) int { return int(audio.DurationToSamples(d, Rate)) }
	for _, tc := range []struct {
		name           string
		outPPM, micPPM int
		// spread is how far the reference may be misplaced, every second
		spread time.Duration
	}{
		{"shared crystal, fast", 1000, 1000, 0},
		{"shared crystal, slow", -1000, -1000, 0},
		{"microphone fast", 0, 1000, epochMoveMin + moveMin},
		{"microphone slow", 0, -1000, epochMoveMin + moveMin},
		{"output fast", 1000, 0, 2 * moveMin},
		{"output slow", -1000, 0, 2 * moveMin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 40 * Rate
			sc := scene{near: noise(n, 20, 0.1), far: noise(n+Rate, 21, 0.3), gain: 0.5, frame: 320, chunk: 160, acoustic: 320,
				outLat: 50 * time.Millisecond, micStart: 40 * time.Millisecond, stamped: true,
				outPPM: tc.outPPM, micPPM: tc.micPPM}
			got := cancelWithOracle(t, sc)
			maxErr := ms(200 * time.Millisecond)
			for s := 1; s < n/Rate; s++ {
				lo, hi, ok := misplacements(sc, got, s*Rate, (s+1)*Rate, maxErr)
				if !ok {
					t.Fatalf("second %d: the reference is misplaced by more than %d samples", s, maxErr)
				}
				t.Logf("second %d: misplaced by %d to %d samples", s, lo, hi)
				if max(-lo, hi) > ms(tc.spread)+1 {
					t.Errorf("second %d: misplaced by %d to %d samples, want within %d", s, lo, hi, ms(tc.spread)+1)
				}
			}
		})
	}
}
