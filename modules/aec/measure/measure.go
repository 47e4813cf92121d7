// Package measure rates an echo canceller on a simulated laptop (audio/room): how much
// echo it removes (ERLE), how fast it gets there, and how much of the user's voice
// survives while both talk.
//
// Definitions, all on windows of Window (100 ms) of the 16 kHz stream:
//   - a window is far-active when the echo's power in it is within ActiveRangeDB of the
//     loudest echo window, near-active likewise for the user's voice;
//   - far-only windows are far-active windows without any near-end signal; double-talk
//     windows are far-active and near-active;
//   - ERLE of a far-only window = 10·log10(echo power at the microphone / power of the
//     canceller's output), the output taken Latency later;
//   - convergence time: from the first far-active window to the end of the last far-only
//     window whose ERLE is below Target (0 when none is);
//   - ERLE after convergence: the echo energy over the output energy, summed over the
//     far-only windows that start at or after the convergence time (after
//     MinSettle when the canceller never converges);
//   - in double talk the output is split, window by window, into the part along the
//     clean near-end signal (its least-squares projection) and the rest (residual echo
//     and distortion). Near-end attenuation = near power / power of that part;
//     near-to-rest ratio = power of that part / power of the rest, measured likewise at
//     the microphone to show what the canceller improved.
package measure

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/modules/aec"
)

// Analysis constants (see the package comment).
const (
	Window        = 100 * time.Millisecond
	ActiveRangeDB = 30.0
	Target        = 25.0 // dB, the ERLE target
	MinSettle     = time.Second
)

// Scene is one simulated run.
type Scene struct {
	// Far is what the agent plays (16 kHz); it also decides the scene's length.
	Far []float32
	// Near is the user's clean voice (16 kHz) starting at NearAt, scaled so that its
	// active level is NearToEchoDB relative to the echo's; nil for far end only.
	Near         []float32
	NearAt       time.Duration
	NearToEchoDB float64
	// Path is the simulated echo path (its Rate must be 0 or 16000).
	Path room.Config
	// Hint is passed to SetDelay before the run.
	Hint time.Duration
	// Block is the number of samples per Render and Capture call (default 160).
	Block int
	// MicClockPPM is how much faster the microphone's clock runs than the speaker's, in
	// parts per million (negative: slower). The microphone then takes that many more
	// samples per million the speaker plays, so the echo moves later in its stream (by
	// 1 ms every 10 s at 100 ppm), while the reference keeps the speaker's clock.
	MicClockPPM int
}

// maxClockPPM bounds MicClockPPM: 10 % is no clock any device has.
const maxClockPPM = 100_000

// WindowResult is the analysis of one window; powers are mean squares.
type WindowResult struct {
	Start           time.Duration
	Echo, Near, Out float64
	FarOnly, Double bool
	ERLE            float64 // dB, far-only windows only
}

// Result is what Run measured.
type Result struct {
	Windows []WindowResult
	// Convergence is the convergence time; Converged is false when even the last
	// far-only window missed Target.
	Convergence time.Duration
	Converged   bool
	// ERLE after convergence (energy ratio), and the median and 10th percentile of
	// the windows' ERLE over the same windows; Counted is how many windows those are.
	ERLE, ERLEMedian, ERLEP10 float64
	Counted                   int
	// AboveTarget is the share of far-only windows after MinSettle with ERLE ≥ Target.
	AboveTarget float64
	// DoubleTalk is measured when the scene has a near end.
	DoubleTalk DoubleTalk
	// Stats are the canceller's own estimates at the end of the run.
	Stats aec.Stats
	// Mic and Out are the microphone signal and the canceller's output (aligned with
	// Mic: the latency removed), for listening to.
	Mic, Out []float32
}

// DoubleTalk figures (see the package comment), in dB, over Windows windows. The same
// figures over the windows where the user speaks and the echo is not active
// (NearOnly*) show how much the canceller changes the user's voice anyway (its
// high-pass filter, noise suppression), as a reference for the double-talk ones.
type DoubleTalk struct {
	Windows          int
	NearAttenuation  float64
	NearToRestMic    float64
	NearToRestOut    float64
	Correlation      float64 // of the output with the clean near end, over all double-talk windows
	CorrelationInput float64 // of the microphone with the clean near end

	NearOnlyWindows     int
	NearOnlyAttenuation float64
	NearOnlyToRestOut   float64
}

// Run plays the scene through the canceller, which it does not close.
func Run(c aec.Canceller, s Scene) (Result, error) {
	if len(s.Far) == 0 {
		return Result{}, errors.New("measure: scene without far end")
	}
	if s.Path.Rate != 0 && s.Path.Rate != aec.Rate {
		return Result{}, fmt.Errorf("measure: path rate %d", s.Path.Rate)
	}
	block := s.Block
	if block <= 0 {
		block = 160
	}
	path, err := room.New(s.Path)
	if err != nil {
		return Result{}, err
	}
	n := len(s.Far)
	if s.MicClockPPM < -maxClockPPM || s.MicClockPPM > maxClockPPM {
		return Result{}, fmt.Errorf("measure: microphone clock %+d ppm off the speaker's", s.MicClockPPM)
	}
	heard, err := onMicClock(s.Far, s.MicClockPPM)
	if err != nil {
		return Result{}, err
	}
	// The echo alone, without the path's noise, to measure against: a second path
	// with the same seed and no noise gives exactly the echo part.
	quiet := s.Path
	quiet.NoiseDB = 0
	qpath, err := room.New(quiet)
	if err != nil {
		return Result{}, err
	}
	echo := qpath.Process(heard)
	mic := path.Process(heard)
	near := make([]float32, n)
	if s.Near != nil {
		at := int(audio.DurationToSamples(s.NearAt, aec.Rate))
		if at < 0 || at >= n {
			return Result{}, fmt.Errorf("measure: near end at %v is outside the scene", s.NearAt)
		}
		copy(near[at:], s.Near)
		echoLevel, nearLevel := activeLevel(echo), activeLevel(near)
		if echoLevel == 0 || nearLevel == 0 {
			return Result{}, errors.New("measure: the echo or the near end is silent")
		}
		gain := echoLevel / nearLevel * math.Pow(10, s.NearToEchoDB/20)
		for i := range near {
			near[i] *= float32(gain)
		}
		for i := range mic {
			mic[i] += near[i]
		}
	}
	c.SetDelay(s.Hint)
	out := make([]float32, 0, n)
	for i := 0; i < n; i += block {
		j := min(i+block, n)
		if err := c.Render(s.Far[i:j]); err != nil {
			return Result{}, err
		}
		o, err := c.Capture(mic[i:j])
		if err != nil {
			return Result{}, err
		}
		out = append(out, o...)
	}
	lat := int(audio.DurationToSamples(c.Latency(), aec.Rate))
	aligned := make([]float32, n)
	copy(aligned, out[lat:])
	r := Analyse(echo, near, mic, aligned)
	r.Stats = c.Stats()
	r.Mic, r.Out = mic, aligned
	return r, nil
}

// onMicClock returns the speaker's output x as a microphone whose clock runs ppm parts
// per million faster samples it, as long as x (cut or padded with silence).
func onMicClock(x []float32, ppm int) ([]float32, error) {
	if ppm == 0 {
		return x, nil
	}
	// At a million samples a second the ratio is exact to the part per million; the
	// resampler only uses the two rates' ratio.
	const base = 1_000_000
	r, err := audio.NewResampler(base, base+ppm, 1, audio.QualityHigh)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	y := append(r.Process(x), r.Flush()...)
	out := make([]float32, len(x))
	copy(out, y)
	return out, nil
}

// activeLevel is the RMS over the signal's active windows (0 for silence).
func activeLevel(x []float32) float64 {
	w := windowLen()
	var pows []float64
	for i := 0; i+w <= len(x); i += w {
		pows = append(pows, meanSquare(x[i:i+w]))
	}
	if len(pows) == 0 || slices.Max(pows) == 0 {
		return 0
	}
	top := slices.Max(pows)
	var sum float64
	var k int
	for _, p := range pows {
		if p > 0 && 10*math.Log10(top/p) <= ActiveRangeDB {
			sum += p
			k++
		}
	}
	return math.Sqrt(sum / float64(k))
}

func windowLen() int { return int(audio.DurationToSamples(Window, aec.Rate)) }

func meanSquare(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e / float64(len(x))
}

func dot(a, b []float32) float64 {
	var e float64
	for i := range a {
		e += float64(a[i]) * float64(b[i])
	}
	return e
}

// Analyse rates a canceller's output against the signals it came from: echo is the echo
// alone at the microphone, near the user's voice alone, mic what the microphone picked
// up, and out the canceller's output aligned with mic (its latency removed), all as
// long as echo. Run uses it; it serves output recorded elsewhere too (a replay through
// the pipeline). Result.Stats, Mic and Out are left empty.
func Analyse(echo, near, mic, out []float32) Result {
	w := windowLen()
	var r Result
	var topEcho, topNear float64
	for i := 0; i+w <= len(echo); i += w {
		topEcho = max(topEcho, meanSquare(echo[i:i+w]))
		topNear = max(topNear, meanSquare(near[i:i+w]))
	}
	active := func(p, top float64) bool { return p > 0 && 10*math.Log10(top/p) <= ActiveRangeDB }
	var dt, dtMic, nearOnly split
	var xo, xm, oo, mm, nn float64
	for i := 0; i+w <= len(echo); i += w {
		wr := WindowResult{
			Start: audio.SamplesToDuration(int64(i), aec.Rate),
			Echo:  meanSquare(echo[i : i+w]),
			Near:  meanSquare(near[i : i+w]),
			Out:   meanSquare(out[i : i+w]),
		}
		farActive, nearActive := active(wr.Echo, topEcho), active(wr.Near, topNear)
		wr.FarOnly = farActive && wr.Near == 0
		wr.Double = farActive && nearActive
		if wr.FarOnly {
			wr.ERLE = 10 * math.Log10(wr.Echo/max(wr.Out, 1e-20))
		}
		nw, ow, mw := near[i:i+w], out[i:i+w], mic[i:i+w]
		switch {
		case wr.Double:
			r.DoubleTalk.Windows++
			dt.add(ow, nw)
			dtMic.add(mw, nw)
			xo += dot(ow, nw)
			xm += dot(mw, nw)
			oo += dot(ow, ow)
			mm += dot(mw, mw)
			nn += dot(nw, nw)
		case nearActive && !farActive:
			r.DoubleTalk.NearOnlyWindows++
			nearOnly.add(ow, nw)
		}
		r.Windows = append(r.Windows, wr)
	}
	if d := &r.DoubleTalk; d.Windows > 0 {
		d.NearAttenuation = dt.attenuation()
		d.NearToRestOut = dt.toRest()
		d.NearToRestMic = dtMic.toRest()
		d.Correlation = xo / math.Sqrt(oo*nn)
		d.CorrelationInput = xm / math.Sqrt(mm*nn)
	}
	if d := &r.DoubleTalk; d.NearOnlyWindows > 0 {
		d.NearOnlyAttenuation = nearOnly.attenuation()
		d.NearOnlyToRestOut = nearOnly.toRest()
	}
	convergence(&r)
	return r
}

// split accumulates, window by window, a signal's part along the clean near end (its
// least-squares projection) and the rest.
type split struct{ near, along, rest float64 }

func (s *split) add(x, near []float32) {
	np := dot(near, near)
	g := dot(x, near) / np
	var rest float64
	for k := range x {
		d := float64(x[k]) - g*float64(near[k])
		rest += d * d
	}
	s.near += np
	s.along += g * g * np
	s.rest += rest
}

func (s split) attenuation() float64 { return 10 * math.Log10(s.near/s.along) }
func (s split) toRest() float64      { return 10 * math.Log10(s.along/s.rest) }

func convergence(r *Result) {
	first := -1
	lastBad := -1
	for i, wr := range r.Windows {
		if first < 0 && (wr.FarOnly || wr.Double) {
			first = i
		}
		if wr.FarOnly && wr.ERLE < Target {
			lastBad = i
		}
	}
	if first < 0 {
		return
	}
	r.Converged = lastBad < 0 || lastBad < len(r.Windows)-1 && anyFarOnlyAfter(r.Windows[lastBad+1:])
	from := r.Windows[first].Start
	if lastBad >= 0 {
		r.Convergence = r.Windows[lastBad].Start + Window - from
	}
	settle := r.Convergence
	if !r.Converged {
		settle = MinSettle
	}
	var echo, out float64
	var erles []float64
	var above, after int
	for _, wr := range r.Windows {
		if !wr.FarOnly {
			continue
		}
		if wr.Start-from >= MinSettle {
			after++
			if wr.ERLE >= Target {
				above++
			}
		}
		if wr.Start-from >= settle {
			echo += wr.Echo
			out += wr.Out
			erles = append(erles, wr.ERLE)
		}
	}
	if after > 0 {
		r.AboveTarget = float64(above) / float64(after)
	}
	r.Counted = len(erles)
	if len(erles) > 0 {
		r.ERLE = 10 * math.Log10(echo/max(out, 1e-20))
		slices.Sort(erles)
		r.ERLEMedian = erles[len(erles)/2]
		r.ERLEP10 = erles[len(erles)/10]
	}
}

func anyFarOnlyAfter(ws []WindowResult) bool {
	for _, w := range ws {
		if w.FarOnly {
			return true
		}
	}
	return false
}

// String summarises the result in one line.
func (r Result) String() string {
	s := fmt.Sprintf("ERLE %.1f dB (median %.1f, p10 %.1f, %d windows), convergence %v (converged %v), ≥%.0f dB in %.0f%% of windows after %v",
		r.ERLE, r.ERLEMedian, r.ERLEP10, r.Counted, r.Convergence, r.Converged, Target, 100*r.AboveTarget, MinSettle)
	if d := r.DoubleTalk; d.Windows > 0 {
		s += fmt.Sprintf("; double talk (%d windows): near-end attenuation %.1f dB, near-to-rest %.1f dB at the mic → %.1f dB out, correlation with near end %.2f → %.2f",
			d.Windows, d.NearAttenuation, d.NearToRestMic, d.NearToRestOut, d.CorrelationInput, d.Correlation)
		if d.NearOnlyWindows > 0 {
			s += fmt.Sprintf("; near end alone (%d windows): attenuation %.1f dB, near-to-rest %.1f dB out",
				d.NearOnlyWindows, d.NearOnlyAttenuation, d.NearOnlyToRestOut)
		}
	}
	return s
}

// Tail is the echo after one of the far end's pauses began, when only the room's
// reverberation reaches the microphone: its level from TailFrom to TailTo after the echo
// stopped, the output's there, and the echo's over the TailBefore before it stopped, in
// dBFS.
type Tail struct {
	At                 time.Duration // where the echo stopped (the far end's pause plus the delay)
	Before, Echo, Left float64
}

// ERLE is the tail's echo over what is left of it, in dB.
func (t Tail) ERLE() float64 { return t.Echo - t.Left }

// The tail windows: a pause is at least MinPause of a silent far end after sound; the
// tail is measured from TailFrom to TailTo after the echo stopped, when the room still
// rings (AEC3 lets it through from about 80 ms on).
const (
	MinPause   = 200 * time.Millisecond
	TailBefore = 200 * time.Millisecond
	TailFrom   = 50 * time.Millisecond
	TailTo     = 200 * time.Millisecond
)

// Tails measures the echo and the output after each pause of the far end: far is what
// was played, echo the echo alone at the microphone, out the canceller's output aligned
// with it, delay the echo path's delay.
func Tails(far, echo, out []float32, delay time.Duration) []Tail {
	n := min(len(far), len(echo), len(out))
	var tails []Tail
	for _, p := range pauses(far[:n]) {
		stop := p.stop + at(delay)
		if stop-at(TailBefore) < 0 || stop+at(TailTo) > n {
			continue
		}
		tails = append(tails, Tail{
			At:     audio.SamplesToDuration(int64(stop), aec.Rate),
			Before: level(echo[stop-at(TailBefore) : stop]),
			Echo:   level(echo[stop+at(TailFrom) : stop+at(TailTo)]),
			Left:   level(out[stop+at(TailFrom) : stop+at(TailTo)]),
		})
	}
	return tails
}

// pause is a stretch of MinPause or more of a silent far end after sound: from stop,
// its first silent sample, to resume, the far end's next sound (−1: none).
type pause struct{ stop, resume int }

// pauses finds the far end's pauses.
func pauses(far []float32) []pause {
	var ps []pause
	sounded, silent := false, 0
	for i, v := range far {
		if v == 0 {
			silent++
			continue
		}
		if sounded && silent >= at(MinPause) {
			ps = append(ps, pause{stop: i - silent, resume: i})
		}
		sounded, silent = true, 0
	}
	if sounded && silent >= at(MinPause) {
		ps = append(ps, pause{stop: len(far) - silent, resume: -1})
	}
	return ps
}

// at is d in samples of the stream.
func at(d time.Duration) int { return int(audio.DurationToSamples(d, aec.Rate)) }

// level is x's power in dBFS.
func level(x []float32) float64 { return 10 * math.Log10(meanSquare(x)+1e-20) }

// Onset is the echo's first OnsetLen after one of the far end's pauses, and what the
// canceller left of it, in dBFS.
type Onset struct {
	At         time.Duration // where the echo begins again (the far end's sound plus the delay)
	Echo, Left float64
}

// ERLE is the onset's echo over what is left of it, in dB.
func (o Onset) ERLE() float64 { return o.Echo - o.Left }

// OnsetLen is how much of the echo after a pause Onsets measures: AEC3's suppressor,
// idle through the pause, lets the first milliseconds of it through.
const OnsetLen = 40 * time.Millisecond

// Onsets measures the echo and the output where the far end sounds again after each of
// its pauses (MinPause or longer; not its first sound): far is what was played, echo
// the echo alone at the microphone, out the canceller's output aligned with it, delay
// the echo path's delay.
func Onsets(far, echo, out []float32, delay time.Duration) []Onset {
	n := min(len(far), len(echo), len(out))
	var onsets []Onset
	for _, p := range pauses(far[:n]) {
		start := p.resume + at(delay)
		if p.resume < 0 || start+at(OnsetLen) > n {
			continue
		}
		onsets = append(onsets, Onset{
			At:   audio.SamplesToDuration(int64(start), aec.Rate),
			Echo: level(echo[start : start+at(OnsetLen)]),
			Left: level(out[start : start+at(OnsetLen)]),
		})
	}
	return onsets
}
