// Package prosody hears how a stretch of speech ends: whether its pitch falls into the
// speaker's low register, as at the end of a statement, or stays level or rises, as
// before a pause in a list ("eggs, … and bread") or a hesitation ("I would like … to
// hear a story"). Listeners use that cue, with the words, to tell a pause from the end
// of a turn; the end-of-turn policy uses it beside the words and the language model's
// estimate.
//
// A Tracker follows the pitch of a 16 kHz stream frame by frame; Ending reads the pitch
// contour before a given stream position. It is pure Go and owned by one goroutine.
package prosody

import (
	"math"
	"slices"
	"time"

	"github.com/parley-voice/parley/audio/pitch"
)

// Rate is the sample rate the tracker expects.
const Rate = 16000

// Analysis frames: a 40 ms window every 10 ms, pitch from 60 to 400 Hz.
const (
	window = 640
	hop    = 160
	minLag = Rate / 400
	maxLag = Rate / 60
	// voicedAt is the normalised autocorrelation a frame needs to count as voiced.
	voicedAt = 0.6
	// activeRange: frames more than this far below the loudest frame (dB) are breath
	// or silence, not the voice.
	activeRange = 30.0
	// silentBelow: frames quieter than this (dBFS) are silence.
	silentBelow = -60.0
	// keep is how much pitch history the tracker keeps: a turn's register.
	keep = 8 * time.Second
)

// Cue is what the end of a stretch of speech says about the turn.
type Cue uint8

const (
	// Unknown: too little voiced speech to tell.
	Unknown Cue = iota
	// Falling: the pitch falls into the speaker's low register: a finished statement.
	Falling
	// Level: the pitch stays in the speaker's middle register or above, without a
	// question's rise: more is coming.
	Level
	// Rising: a steep final rise, as of a question (or a list's item read with a
	// rise): it may end the turn as well as not.
	Rising
)

var cueNames = [...]string{Unknown: "unknown", Falling: "falling", Level: "level", Rising: "rising"}

func (c Cue) String() string {
	if int(c) < len(cueNames) {
		return cueNames[c]
	}
	return "cue?"
}

// Thresholds of the ending, in semitones.
const (
	// fallBelow: an ending this far below the speaker's median pitch is low register.
	fallBelow = 1.5
	// fallSlope: an ending falling this fast (semitones per second) is falling, unless
	// it stays above the median.
	fallSlope = -8.0
	// riseAbove: an ending this far above the median, and still rising, is a rise.
	riseAbove = 3.0
	// minRange: a voice whose pitch spans less than this over the turn (its 10th to
	// 90th percentile) is monotone, and its ending says nothing.
	minRange = 3.0
	// minVoiced is how many voiced frames the ending needs (80 ms), and minTurn how
	// many the register does.
	minVoiced = 8
	minTurn   = 20
	// endSpan is how much of the speech before its end the ending reads; tailFrames
	// the last voiced frames whose pitch is the ending's.
	endSpan    = 300 * time.Millisecond
	tailFrames = 6
)

// frame is one analysis frame: its stream position (end of the frame's hop), level and
// pitch (semitones above 100 Hz; NaN when unvoiced).
type frame struct {
	pos   int64
	level float64
	pitch float64
}

// Tracker follows the pitch of a stream.
type Tracker struct {
	buf    []float32 // the last window's samples and those not yet analysed
	pos    int64     // the stream position of the end of buf
	frames []frame
	// x and pitch are the analysis's scratch space.
	x     []float64
	pitch *pitch.Correlator
}

// NewTracker returns a tracker for a stream that begins at position 0.
func NewTracker() *Tracker {
	return &Tracker{x: make([]float64, window), pitch: newCorrelator()}
}

// Push adds the samples that follow the stream position reached so far.
func (t *Tracker) Push(samples []float32) {
	t.buf = append(t.buf, samples...)
	t.pos += int64(len(samples))
	for len(t.buf) >= window {
		end := t.pos - int64(len(t.buf)) + window
		t.frames = append(t.frames, t.analyse(t.buf[:window], end))
		t.buf = t.buf[hop:]
	}
	if cap(t.buf) > 8*window {
		t.buf = append(make([]float32, 0, 2*window), t.buf...)
	}
	if n := len(t.frames); n > 0 {
		oldest := t.frames[n-1].pos - int64(keep.Seconds()*Rate)
		i := 0
		for i < n && t.frames[i].pos < oldest {
			i++
		}
		if i > n/2 {
			t.frames = append(t.frames[:0], t.frames[i:]...)
		}
	}
}

// Skip moves the stream position on by n samples that are not pushed (a gap).
func (t *Tracker) Skip(n int64) {
	t.buf = t.buf[:0]
	t.pos += n
}

func (t *Tracker) analyse(s []float32, end int64) frame {
	var mean float64
	for _, v := range s {
		mean += float64(v)
	}
	mean /= float64(len(s))
	var energy float64
	for i, v := range s {
		x := float64(v) - mean
		t.x[i] = x
		energy += x * x
	}
	f := frame{pos: end, level: 10 * math.Log10(energy/float64(len(s))+1e-12), pitch: math.NaN()}
	if f.level < silentBelow {
		return f // silence has no pitch, and costs nothing
	}
	if hz := pitchOf(t.pitch, t.x); hz > 0 {
		f.pitch = 12 * math.Log2(hz/100)
	}
	return f
}

// newCorrelator returns the correlator pitchOf reads: lags one past maxLag, for the
// parabola through the last one's neighbours.
func newCorrelator() *pitch.Correlator { return pitch.NewCorrelator(minLag, maxLag+1) }

// pitchOf returns the frame's pitch in Hz (0: unvoiced): the shortest lag whose
// normalised autocorrelation comes near the best one (the period, not a multiple of it),
// refined by a parabola through its neighbours.
func pitchOf(pc *pitch.Correlator, x []float64) float64 {
	corr := pc.Correlate(x, 1)
	best := slices.Max(corr[:maxLag+1])
	if best < voicedAt {
		return 0
	}
	for lag := minLag + 1; lag <= maxLag; lag++ {
		c := corr[lag]
		if c < 0.9*best || c < corr[lag-1] || c < corr[lag+1] {
			continue
		}
		den := corr[lag-1] - 2*c + corr[lag+1]
		shift := 0.0
		if den < 0 {
			shift = 0.5 * (corr[lag-1] - corr[lag+1]) / den
		}
		return Rate / (float64(lag) + shift)
	}
	return 0
}

// Ending returns the cue of the speech that ends at stream position end (in samples),
// read against the pitch of the speech since from: the speaker's register in this turn.
func (t *Tracker) Ending(from, end int64) Cue {
	var peak float64 = -200
	for _, f := range t.frames {
		if f.pos > from && f.pos <= end {
			peak = max(peak, f.level)
		}
	}
	var turn []float64
	type point struct{ at, pitch float64 }
	var tail []point
	spanFrom := end - int64(endSpan.Seconds()*Rate)
	for _, f := range t.frames {
		if f.pos <= from || f.pos > end || math.IsNaN(f.pitch) || f.level < peak-activeRange {
			continue
		}
		turn = append(turn, f.pitch)
		if f.pos > spanFrom {
			tail = append(tail, point{float64(f.pos) / Rate, f.pitch})
		}
	}
	if len(turn) < minTurn || len(tail) < minVoiced {
		return Unknown
	}
	sorted := slices.Clone(turn)
	slices.Sort(sorted)
	if sorted[len(sorted)*9/10]-sorted[len(sorted)/10] < minRange {
		return Unknown
	}
	median := medianOf(turn)
	last := make([]float64, 0, tailFrames)
	for _, p := range tail[max(0, len(tail)-tailFrames):] {
		last = append(last, p.pitch)
	}
	ending := medianOf(last) - median
	// The slope of the ending: a least-squares line through its voiced frames.
	var sx, sy, sxx, sxy float64
	for _, p := range tail {
		sx += p.at
		sy += p.pitch
		sxx += p.at * p.at
		sxy += p.at * p.pitch
	}
	k := float64(len(tail))
	slope := 0.0
	if d := k*sxx - sx*sx; d > 0 {
		slope = (k*sxy - sx*sy) / d
	}
	switch {
	case ending <= -fallBelow, slope <= fallSlope && ending < 0:
		return Falling
	case ending >= riseAbove && slope > 0:
		return Rising
	}
	return Level
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
