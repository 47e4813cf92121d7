package aec

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
)

// quitter is a frame engine that behaves as AEC3 does at a phrase's end: it removes the
// echo (known to it in advance) while the reference plays and for 80 ms after, then
// passes the microphone through untouched, reverberation and all. At the start of a
// phrase after a pause (200 ms or more) it leaves a tenth of the echo's first 10 ms and
// a hundredth of the next 10 (the echo begins its delay, 30 ms, after the reference's
// onset): AEC3's suppressor, idle through the pause, does about that.
type quitter struct {
	sinceSound int
	echo       []float32
	pos        int
	leakFrom   int // microphone position of the echo's onset after a pause (0: none yet)
}

// quitterLeak is how long the quitter leaks an onset; quitterLeakLevel the power it
// leaves in each 10 ms of it.
const quitterLeak = 20 * time.Millisecond

var quitterLeakLevel = []float64{0.1, 0.01}

func (q *quitter) FrameSize() int { return 160 }
func (q *quitter) ProcessRender(far []float32) error {
	q.sinceSound++
	if power(far, len(far)) > 0 {
		if q.sinceSound > 20 && q.pos > 0 {
			q.leakFrom = q.pos + samples(30*time.Millisecond)
		}
		q.sinceSound = 0
	}
	return nil
}

func (q *quitter) ProcessCapture(near []float32) error {
	for i := range near {
		p := q.pos + i
		if q.sinceSound <= 8 && p < len(q.echo) {
			if q.leakFrom > 0 && p >= q.leakFrom && p < q.leakFrom+samples(quitterLeak) {
				left := quitterLeakLevel[(p-q.leakFrom)/samples(10*time.Millisecond)]
				near[i] -= float32(1-math.Sqrt(left)) * q.echo[p]
			} else {
				near[i] -= q.echo[p]
			}
		}
	}
	q.pos += len(near)
	return nil
}
func (q *quitter) SetStreamDelay(time.Duration) {}
func (q *quitter) Latency() time.Duration       { return 0 }
func (q *quitter) Stats() Stats                 { return Stats{} }
func (q *quitter) Close() error                 { return nil }

func samples(d time.Duration) int { return int(audio.DurationToSamples(d, Rate)) }

// tailScene is a second of the agent's "voice" (noise) followed by silence, its echo
// through a room with RT60 rt (30 ms, −6 dB), and the user's voice (noise, userDB
// against the echo's level) from userAt on (none when userAt is 0).
type tailScene struct {
	far, echo, user []float32
}

func newTailScene(t *testing.T, rt time.Duration, userAt time.Duration, userDB float64) tailScene {
	t.Helper()
	n := samples(2 * time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	far := make([]float32, n)
	for i := range samples(time.Second) {
		far[i] = float32(0.1 * rng.NormFloat64())
	}
	path, err := room.New(room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: rt, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sc := tailScene{far: far, echo: path.Process(far), user: make([]float32, n)}
	if userAt > 0 {
		level := math.Sqrt(power(sc.echo[samples(500*time.Millisecond):samples(time.Second)], samples(500*time.Millisecond)))
		amp := level * math.Pow(10, userDB/20)
		for i := samples(userAt); i < n; i++ {
			sc.user[i] = float32(amp * rng.NormFloat64())
		}
	}
	return sc
}

func (sc tailScene) mic() []float32 {
	m := make([]float32, len(sc.echo))
	for i := range m {
		m[i] = sc.echo[i] + sc.user[i]
	}
	return m
}

// run plays the scene through c in blocks of the given sizes (cycled), rendering each
// block's reference before capturing it, and returns the output aligned with the input.
func (sc tailScene) run(t *testing.T, c Canceller, blocks ...int) []float32 {
	t.Helper()
	c.SetDelay(30 * time.Millisecond)
	mic := sc.mic()
	var out []float32
	for i, b := 0, 0; i < len(mic); b++ {
		j := min(i+blocks[b%len(blocks)], len(mic))
		if err := c.Render(sc.far[i:j]); err != nil {
			t.Fatal(err)
		}
		o, err := c.Capture(mic[i:j])
		if err != nil {
			t.Fatal(err)
		}
		if len(o) != j-i {
			t.Fatalf("%d samples in, %d out", j-i, len(o))
		}
		out = append(out, o...)
		i = j
	}
	return out[samples(c.Latency()):]
}

func newQuitter(t *testing.T, gate bool, echo []float32) Canceller {
	t.Helper()
	s, err := NewStream(&quitter{sinceSound: 100, echo: echo})
	if err != nil {
		t.Fatal(err)
	}
	if !gate {
		return s
	}
	g, err := NewTailGate(s, TailConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func levelDB(x []float32) float64 { return 10 * math.Log10(power(x, len(x))+1e-20) }

// TestTailGateRemovesTheTail: after the agent's last sound, the inner canceller lets the
// room's tail through; with the gate, every 10 ms of the tail is at least 25 dB below
// the echo's level, for rooms up to the gate's RT60 — and the output changes by no
// more than a linear ramp would (no clicks).
func TestTailGateRemovesTheTail(t *testing.T) {
	for _, rt := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		sc := newTailScene(t, rt, 0, 0)
		echoLevel := levelDB(sc.echo[samples(500*time.Millisecond):samples(time.Second)])
		without := sc.run(t, newQuitter(t, false, sc.echo), 160)
		with := sc.run(t, newQuitter(t, true, sc.echo), 160)
		worstWithout, worstWith := math.Inf(1), math.Inf(1)
		for from := time.Second; from < 1600*time.Millisecond; from += 10 * time.Millisecond {
			i, j := samples(from), samples(from+10*time.Millisecond)
			if levelDB(sc.echo[i:j]) < echoLevel-60 {
				break // the tail has died away
			}
			worstWithout = min(worstWithout, echoLevel-levelDB(without[i:j]))
			worstWith = min(worstWith, echoLevel-levelDB(with[i:j]))
		}
		t.Logf("RT60 %v: the tail at least %.1f dB below the echo without the gate, %.1f dB with it", rt, worstWithout, worstWith)
		if worstWithout >= 25 {
			t.Errorf("RT60 %v: the inner canceller let no tail through (%.1f dB): the scene tests nothing", rt, worstWithout)
		}
		if worstWith < 25 {
			t.Errorf("RT60 %v: the tail only %.1f dB below the echo with the gate, want ≥ 25", rt, worstWith)
		}
	}
}

// TestTailGateIdleWhileTheFarEndPlays: while the agent speaks the gate passes the inner
// canceller's output unchanged (one block later), and without any far end at all the
// user's voice comes through untouched.
func TestTailGateIdleWhileTheFarEndPlays(t *testing.T) {
	sc := newTailScene(t, 300*time.Millisecond, 300*time.Millisecond, 0)
	without := sc.run(t, newQuitter(t, false, sc.echo), 160)
	with := sc.run(t, newQuitter(t, true, sc.echo), 160)
	for i := range samples(time.Second) {
		if with[i] != without[i] {
			t.Fatalf("sample %d (%v): %g with the gate, %g without, while the far end plays", i, audio.SamplesToDuration(int64(i), Rate), with[i], without[i])
		}
	}
	quiet := tailScene{far: make([]float32, len(sc.far)), echo: make([]float32, len(sc.far)), user: sc.user}
	got := quiet.run(t, newQuitter(t, true, quiet.echo), 160)
	for i := range got {
		if got[i] != sc.user[i] {
			t.Fatalf("sample %d: %g, the user said %g, and there was no echo", i, got[i], sc.user[i])
		}
	}
}

// TestTailGateKeepsTheUser: a user who speaks on as the agent stops (a barge-in, the
// voice 6 dB above the echo) loses at most 1.5 dB over the tail's first 300 ms, and
// nothing once the tail is gone (the output ends the latency before the input).
func TestTailGateKeepsTheUser(t *testing.T) {
	sc := newTailScene(t, 300*time.Millisecond, 700*time.Millisecond, 6)
	got := sc.run(t, newQuitter(t, true, sc.echo), 160)
	for _, w := range []struct {
		from, to time.Duration
		maxLoss  float64
	}{{time.Second, 1300 * time.Millisecond, 1.5}, {1500 * time.Millisecond, 1900 * time.Millisecond, 0.01}} {
		i, j := samples(w.from), samples(w.to)
		// What the user's voice kept: the output against the voice plus the tail.
		loss := levelDB(sc.mic()[i:j]) - levelDB(got[i:j])
		t.Logf("%v–%v: %.2f dB lost", w.from, w.to, loss)
		if loss > w.maxLoss {
			t.Errorf("%v–%v: the user's voice lost %.2f dB, want ≤ %g", w.from, w.to, loss, w.maxLoss)
		}
	}
}

// newOnsetScene is a second of the agent's "voice", a pause of 300 ms and 700 ms more,
// its echo through a room (RT60 300 ms, 30 ms, −6 dB), and the user's voice (userDB
// against the echo's level) from userAt to 1.6 s, across the second phrase's onset
// (none when userAt is 0).
func newOnsetScene(t *testing.T, userAt time.Duration, userDB float64) tailScene {
	t.Helper()
	sc := newTailScene(t, 300*time.Millisecond, 0, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := samples(1300 * time.Millisecond); i < samples(2*time.Second); i++ {
		sc.far[i] = float32(0.1 * rng.NormFloat64())
	}
	path, err := room.New(room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sc.echo = path.Process(sc.far)
	if userAt > 0 {
		level := math.Sqrt(power(sc.echo[samples(500*time.Millisecond):samples(time.Second)], samples(500*time.Millisecond)))
		amp := level * math.Pow(10, userDB/20)
		for i := samples(userAt); i < samples(1600*time.Millisecond); i++ {
			sc.user[i] = float32(amp * rng.NormFloat64())
		}
	}
	return sc
}

// TestTailGateOnset: the inner canceller's leak at a phrase's onset after a pause goes:
// with the gate every 10 ms of the onset is at least 25 dB below the echo. A user who
// speaks through the pause into the onset, as loud as the echo or 9 dB below it, loses
// at most 0.5 dB over the onset, one who begins with the onset, as loud as the echo,
// at most 1 dB, and neither anything after it.
func TestTailGateOnset(t *testing.T) {
	echoAt := 1330 * time.Millisecond // the second phrase's echo begins
	sc := newOnsetScene(t, 0, 0)
	echoLevel := levelDB(sc.echo[samples(500*time.Millisecond):samples(time.Second)])
	without := sc.run(t, newQuitter(t, false, sc.echo), 160)
	with := sc.run(t, newQuitter(t, true, sc.echo), 160)
	worstWithout, worstWith := math.Inf(1), math.Inf(1)
	for from := echoAt; from < echoAt+quitterLeak; from += 10 * time.Millisecond {
		i, j := samples(from), samples(from+10*time.Millisecond)
		worstWithout = min(worstWithout, echoLevel-levelDB(without[i:j]))
		worstWith = min(worstWith, echoLevel-levelDB(with[i:j]))
	}
	t.Logf("the onset's leak at least %.1f dB below the echo without the gate, %.1f dB with it", worstWithout, worstWith)
	if worstWithout >= 25 {
		t.Errorf("the inner canceller let no onset through (%.1f dB): the scene tests nothing", worstWithout)
	}
	if worstWith < 25 {
		t.Errorf("the onset only %.1f dB below the echo with the gate, want ≥ 25", worstWith)
	}
	for _, u := range []struct {
		at      time.Duration
		db      float64
		maxLoss float64
	}{{1200 * time.Millisecond, 0, 0.5}, {1200 * time.Millisecond, -9, 0.5}, {echoAt, 0, 1}} {
		sc := newOnsetScene(t, u.at, u.db)
		got := sc.run(t, newQuitter(t, true, sc.echo), 160)
		for _, w := range []struct {
			from, to time.Duration
			maxLoss  float64
		}{{echoAt - 20*time.Millisecond, echoAt + 50*time.Millisecond, u.maxLoss}, {echoAt + 100*time.Millisecond, 1600 * time.Millisecond, 0.01}} {
			i, j := samples(max(w.from, u.at)), samples(w.to)
			loss := levelDB(sc.user[i:j]) - levelDB(got[i:j])
			t.Logf("the user from %v at %+g dB, %v–%v: %.2f dB lost", u.at, u.db, w.from, w.to, loss)
			if loss > w.maxLoss {
				t.Errorf("the user from %v at %+g dB, %v–%v: the voice lost %.2f dB, want ≤ %g", u.at, u.db, w.from, w.to, loss, w.maxLoss)
			}
		}
	}
}

// TestTailGateBlockSizes: the output does not depend on how the audio is cut.
func TestTailGateBlockSizes(t *testing.T) {
	sc := newTailScene(t, 300*time.Millisecond, 1200*time.Millisecond, 0)
	want := sc.run(t, newQuitter(t, true, sc.echo), 160)
	got := sc.run(t, newQuitter(t, true, sc.echo), 1, 97, 320, 33, 480, 7)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sample %d: %g in odd blocks, %g in 10 ms blocks", i, got[i], want[i])
		}
	}
}

// TestTailGateNoClicks: on a steady input the gain never steps: once the echo has
// stopped, consecutive samples of a steady hum differ by at most what a ramp over one
// block allows, as the gate lets it back in.
func TestTailGateNoClicks(t *testing.T) {
	sc := newTailScene(t, 300*time.Millisecond, 0, 0)
	// An echo without reverberation (it stops dead), and a steady hum under it.
	const hum = 0.002
	delay := samples(30 * time.Millisecond)
	for i := range sc.echo {
		sc.echo[i] = 0
		if i >= delay {
			sc.echo[i] = sc.far[i-delay] / 2
		}
		sc.user[i] = hum
	}
	got := sc.run(t, newQuitter(t, true, sc.echo), 160)
	var steps int
	for i := samples(time.Second) + delay + 1; i < len(got); i++ {
		d := math.Abs(float64(got[i] - got[i-1]))
		if d > hum/160*1.001 {
			t.Fatalf("sample %d (%v): a step of %g on a steady %g", i, audio.SamplesToDuration(int64(i), Rate), d, hum)
		}
		if d > 0 {
			steps++
		}
	}
	if got[len(got)-1] != hum || steps == 0 {
		t.Errorf("the hum ends at %g (want %g) after %d gain changes: the gate never closed and opened", got[len(got)-1], hum, steps)
	}
}

// TestTailGateBadInput: samples that are not finite in either stream (a broken source)
// leave the output finite and the gate working: the tail after them is still removed.
func TestTailGateBadInput(t *testing.T) {
	sc := newTailScene(t, 300*time.Millisecond, 0, 0)
	want := sc.run(t, newQuitter(t, true, sc.echo), 160)
	for i := samples(200 * time.Millisecond); i < samples(300*time.Millisecond); i += 7 {
		bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[i%3]
		sc.far[i], sc.user[i] = bad, bad
	}
	got := sc.run(t, newQuitter(t, true, sc.echo), 160)
	for i, v := range got {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("sample %d (%v) is %g", i, audio.SamplesToDuration(int64(i), Rate), v)
		}
	}
	from, to := samples(1100*time.Millisecond), samples(1400*time.Millisecond)
	if l, w := levelDB(got[from:to]), levelDB(want[from:to]); l > w+1 {
		t.Errorf("the tail after the bad samples: %.1f dBFS, %.1f dBFS without them", l, w)
	}
}

type closeCounter struct {
	Canceller
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return errors.New("closed") }

// TestNewTailGateBadConfig: a bad config is an error that names it, and the inner
// canceller is closed.
func TestNewTailGateBadConfig(t *testing.T) {
	inner := &closeCounter{Canceller: newQuitter(t, false, nil)}
	if _, err := NewTailGate(inner, TailConfig{RT60: -time.Second}); err == nil || inner.closed != 1 {
		t.Fatalf("err %v, inner closed %d times", err, inner.closed)
	}
}
