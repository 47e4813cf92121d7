package aec

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/parley-voice/parley/audio"
)

// TailGate is a Canceller around another that removes the room's reverberation tail
// the inner one lets through after the far end falls silent.
//
// Why: AEC3 cancels the echo while the agent speaks and shortly after a phrase ends;
// from then on it passes the microphone through untouched while the room still rings
// with the last syllable, for as long as the tail takes to die away. A VAD may take
// that for the start of speech.
//
// How: the gate follows the echo's envelope from the reference alone: the reference's
// power per 10 ms block, held at its peak and decaying as a room with TailConfig.RT60
// would (an upper bound for rooms up to that), delayed by the delay hint, and scaled by
// the echo path's gain. That gain is the median ratio of the microphone's power to the
// envelope over the blocks where the far end plays and the inner canceller removed
// most of what the microphone heard, so the user's voice (which it keeps) does not
// inflate it. In the tail only (from three blocks after the delayed reference fell
// silent until it sounds again) a block gets the power gain 1 − Over·estimate/output,
// 0 at least: the tail goes, a user who speaks louder than it passes nearly whole.
// While the far end plays the gate does nothing, so double talk is the inner
// canceller's alone, except over a phrase's onset (onsetBlocks) after a pause in which
// the gate let nothing through: AEC3's suppressor, idle through the pause, lets the
// first milliseconds of the phrase's echo through. There a block gets
// the same gain against an estimate of that residue: a tenth of the echo expected
// (the envelope and the path's gain) where the microphone rose 6 dB or more above its
// level before the onset, a hundredth elsewhere; and only in blocks where the inner
// canceller took out 6 dB or more of what the microphone heard. A user who speaks
// through the pause keeps the voice at the onset too (the gate leaves such an onset
// be), and so does one who begins just as the agent does, louder than its echo (the
// canceller passes that voice). The gain moves linearly across each block (no clicks).
//
// The gate weighs a whole block of output at a time, so its output lags the inner
// canceller's by one block (10 ms). Render and Capture must keep pace as the Canceller
// contract says: the gate pairs them block by block.
type TailGate struct {
	c     Canceller
	cfg   TailConfig
	inner int     // the inner canceller's latency in samples
	decay float64 // the envelope's decay per block, as a power ratio

	// Input side, block by block.
	ref, mic []float32    // samples not yet in a whole block
	env      float64      // the reference's peak-held envelope (power)
	delayed  []blockPower // the last blocks, oldest first: the hint's delay
	quiet    int          // blocks since the delayed reference was last active
	onset    int          // blocks of a phrase's onset still to come
	lastMic  float64      // the microphone's power in the last block
	before   float64      // the microphone's power just before the onset under way
	blocks   []inputBlock // from blocksBase on, until their output is weighed
	base     int64

	pathLog float64 // log10 of the echo path's power gain (microphone over envelope)
	learned bool

	// Output side: the inner canceller's output from position outPos on (position p
	// holds input sample p−inner), one block more than has been returned.
	out     []float32
	outPos  int64
	block   int64   // the block the last returned sample belonged to
	amp     float64 // its amplitude gain, and the block's before it
	prevAmp float64
	// passed is the power of the last block weighed, after its gain; onsetGated: the
	// onset under way follows a pause the gate let nothing through.
	passed     float64
	onsetGated bool
	// linear is the inner canceller's linear output beside out (ungated: the tail is
	// the suppressor's to judge), when it has one.
	linear []float32
}

// inputBlock is what the gate knows of one input block before its output is weighed.
type inputBlock struct {
	mic, env float64 // the microphone's power and the delayed envelope
	active   bool    // the delayed reference sounds
	tail     bool
	// onsetEnv is the envelope of a phrase after a pause over its onset's blocks (0 in
	// all others); rose: the microphone is 6 dB or more above its level before the
	// onset (the echo, not a user already speaking).
	onsetEnv   float64
	rose       bool
	onsetFirst bool // the onset's first block
}

// TailConfig tunes the gate; the zero value is the default.
type TailConfig struct {
	// RT60 is the longest reverberation time the gate expects (600 ms): the envelope
	// decays 60 dB in it. A room with a longer one keeps part of its tail.
	RT60 time.Duration
	// Over is how many times the estimate is taken off (2): the estimate is a median,
	// and a tail louder than it must go too.
	Over float64
}

func (c TailConfig) withDefaults() TailConfig {
	if c.RT60 == 0 {
		c.RT60 = 600 * time.Millisecond
	}
	if c.Over == 0 {
		c.Over = 2
	}
	return c
}

// blockPower is one block's reference power and envelope.
type blockPower struct{ ref, env float64 }

// Gate constants: the block the envelopes are taken on, the power below which the
// reference counts as silent (−60 dBFS), and how fast the echo path's gain moves
// toward the median (log10 units per block: 0.2 dB).
const (
	gateBlock  = Rate / 100
	gateActive = 1e-6
	gateStep   = 0.02
	// echoDominated: a block teaches the echo path's gain when the inner canceller
	// took out 10 dB or more of it (it keeps the user's voice).
	echoDominated = 0.1
	// negligible: a tail estimate this far below the output (−30 dB) is let be.
	negligible = 0.001
	// tailAfter is how many blocks after the reference's echo stopped the tail
	// begins: the delay hint is not exact.
	tailAfter = 2
	// maxAhead bounds the reference kept ahead of the microphone (1 s).
	maxAhead = Rate
	// onsetBlocks is how many blocks of a phrase that follows a pause count as its
	// onset, from the one its echo is due in; onsetAhead how many blocks before it they
	// begin (the echo is due by the delay hint, which is not exact, and the phrase's
	// first sound may fall short of gateActive in its first block). onsetArrival and
	// onsetResidue are the share of the echo's power the inner canceller is taken to
	// leave where the echo arrives (the microphone rose by onsetRise) and in the rest of
	// the onset (AEC3 leaves most in the echo's first block).
	onsetBlocks  = 4
	onsetAhead   = 2
	onsetArrival = 0.1
	onsetResidue = 0.01
	onsetRise    = 4
	// onsetQuiet: a pause whose last block let through less than this share of the
	// echo expected (−30 dB) had no user in it. onsetLeak: an onset's block is weighed
	// only where the inner canceller took out 6 dB or more of the microphone (its leak
	// is 10 dB or more below it); a user who begins with the agent's phrase, louder than
	// its echo, passes it nearly whole.
	onsetQuiet = 0.001
	onsetLeak  = 0.25
)

var _ LinearCanceller = (*TailGate)(nil)

// NewTailGate wraps c, which the gate owns from now on: its Close closes c, and so
// does a failing NewTailGate.
func NewTailGate(c Canceller, cfg TailConfig) (*TailGate, error) {
	cfg = cfg.withDefaults()
	if cfg.RT60 < 0 || cfg.Over < 0 {
		return nil, errors.Join(fmt.Errorf("aec: tail gate: negative RT60 %v or over-subtraction %g", cfg.RT60, cfg.Over), c.Close())
	}
	inner := latencySamples(c)
	perBlock := 60 / cfg.RT60.Seconds() / 100 // dB
	g := &TailGate{
		c: c, cfg: cfg, inner: inner, decay: math.Pow(10, -perBlock/10),
		delayed: make([]blockPower, 1),
		// The first block of output is silence (the gate's lag), as if it came before
		// the stream: position −gateBlock.
		out: make([]float32, gateBlock), outPos: -gateBlock,
		block: math.MinInt64, amp: 1, prevAmp: 1,
	}
	if _, ok := c.(LinearCanceller); ok {
		g.linear = make([]float32, gateBlock)
	}
	return g, nil
}

// Render implements Canceller.
func (g *TailGate) Render(far []float32) error {
	if err := g.c.Render(far); err != nil {
		return err
	}
	g.ref = append(g.ref, far...)
	if extra := len(g.ref) - maxAhead; extra > 0 {
		// Render ran ahead of Capture, against the contract: the oldest goes.
		g.ref = append(g.ref[:0], g.ref[extra:]...)
	}
	return nil
}

// Capture implements Canceller.
func (g *TailGate) Capture(near []float32) ([]float32, error) {
	out, _, err := g.CaptureLinear(near)
	return out, err
}

// CaptureLinear implements LinearCanceller: the inner canceller's linear output, as
// late as the gated output; nil when it has none.
func (g *TailGate) CaptureLinear(near []float32) ([]float32, []float32, error) {
	var out, linear []float32
	var err error
	if lc, ok := g.c.(LinearCanceller); ok {
		out, linear, err = lc.CaptureLinear(near)
	} else {
		out, err = g.c.Capture(near)
	}
	if out == nil {
		return nil, nil, err
	}
	if g.linear != nil && linear != nil {
		g.linear = append(g.linear, linear...)
		linear = take(&g.linear, len(near))
	} else {
		linear = nil
	}
	g.mic = append(g.mic, near...)
	for len(g.mic) >= gateBlock {
		ref := g.ref[:min(gateBlock, len(g.ref))] // not rendered yet: silence
		g.inputBlock(power(ref, gateBlock), power(g.mic[:gateBlock], gateBlock))
		g.ref = g.ref[len(ref):]
		g.mic = g.mic[gateBlock:]
	}
	g.out = append(g.out, out...)
	res := make([]float32, len(near))
	for i := range res {
		res[i] = g.out[i] * float32(g.gainAt(g.outPos+int64(i)))
	}
	g.out = append(g.out[:0], g.out[len(near):]...)
	g.outPos += int64(len(near))
	return res, linear, err
}

// inputBlock takes one block's reference and microphone power.
func (g *TailGate) inputBlock(ref, mic float64) {
	g.env = max(ref, g.env*g.decay)
	g.delayed = append(g.delayed[1:], blockPower{ref: ref, env: g.env})
	// The blocks after delayed[0] are the reference's next ones: a phrase after a pause
	// is seen coming onsetAhead blocks before its echo is due.
	ahead := g.delayed[:min(onsetAhead, len(g.delayed)-1)+1]
	var soonRef, soonEnv float64
	for _, a := range ahead {
		soonRef, soonEnv = max(soonRef, a.ref), max(soonEnv, a.env)
	}
	first := g.quiet > tailAfter && g.onset == 0 && soonRef > gateActive
	if first {
		g.onset, g.before = len(ahead)-1+onsetBlocks, g.lastMic
	}
	g.lastMic = mic
	d := g.delayed[0]
	if d.ref > gateActive {
		g.quiet = 0
	} else {
		g.quiet++
	}
	b := inputBlock{mic: mic, env: d.env, active: g.quiet == 0, tail: g.quiet > tailAfter}
	if g.onset > 0 {
		b.onsetEnv, b.rose, b.onsetFirst, g.onset = soonEnv, mic >= onsetRise*g.before, first, g.onset-1
	}
	g.blocks = append(g.blocks, b)
}

// gainAt returns the amplitude gain for output position p, whose block's output is
// whole in g.out by then (see the type's comment on the lag).
func (g *TailGate) gainAt(p int64) float64 {
	k := floorDiv(p-int64(g.inner), gateBlock)
	if k != g.block {
		g.prevAmp, g.amp, g.block = g.amp, g.weigh(k), k
	}
	i := p - int64(g.inner) - k*gateBlock
	return g.prevAmp + (g.amp-g.prevAmp)*float64(i+1)/gateBlock
}

// weigh takes input block k's output: it learns the echo path's gain from it, or
// returns the block's amplitude gain in the tail or an onset; the blocks before k are
// forgotten.
func (g *TailGate) weigh(k int64) float64 {
	j := k - g.base
	if j < 0 || j >= int64(len(g.blocks)) {
		return 1 // before the stream
	}
	b := g.blocks[j]
	g.blocks, g.base = g.blocks[j:], k
	from := k*gateBlock + int64(g.inner) - g.outPos
	out := power(g.out[from:from+gateBlock], gateBlock)
	gain := g.decide(b, out)
	g.passed = out * gain * gain
	return gain
}

// decide returns the amplitude gain of block b, whose output has power out.
func (g *TailGate) decide(b inputBlock, out float64) float64 {
	path := math.Pow(10, g.pathLog)
	if b.onsetFirst {
		// An onset is weighed only after a pause the gate let nothing through: a user
		// who speaks through the pause keeps the voice at the onset too.
		g.onsetGated = g.passed < onsetQuiet*b.onsetEnv*path
	}
	switch {
	case b.onsetEnv > 0 && g.learned && g.onsetGated && out < onsetLeak*b.mic:
		// The onset's residue, and in its first blocks the tail before it, must go.
		share := onsetResidue
		if b.rose {
			share = onsetArrival
		}
		est := share * b.onsetEnv
		if b.tail {
			est = max(est, b.env)
		}
		return gainAgainst(g.cfg.Over*est*path, out)
	case b.onsetEnv == 0 && b.active && b.env > gateActive && b.mic > 0 && out < b.mic*echoDominated:
		r := math.Log10(b.mic / b.env)
		switch {
		case !g.learned:
			g.pathLog, g.learned = r, true
		case r > g.pathLog:
			g.pathLog += gateStep
		default:
			g.pathLog -= gateStep
		}
	case b.tail && g.learned:
		return gainAgainst(g.cfg.Over*b.env*path, out)
	}
	return 1
}

// gainAgainst is the amplitude gain that takes the estimated power est of what must go
// out of a block whose output has power out.
func gainAgainst(est, out float64) float64 {
	switch {
	case out == 0:
		return 0
	case est < out*negligible:
		return 1
	}
	return math.Sqrt(max(0, 1-est/out))
}

// SetDelay implements Canceller; the gate delays its envelope by the hint too.
func (g *TailGate) SetDelay(d time.Duration) {
	g.c.SetDelay(d)
	n := int(max(0, d) / audio.SamplesToDuration(gateBlock, Rate))
	g.delayed = make([]blockPower, n+1)
}

// Latency implements Canceller: the inner canceller's and one block.
func (g *TailGate) Latency() time.Duration {
	return audio.SamplesToDuration(int64(g.LatencySamples()), Rate)
}

// LatencySamples is Latency in samples.
func (g *TailGate) LatencySamples() int { return g.inner + gateBlock }

// Stats implements Canceller: the inner canceller's.
func (g *TailGate) Stats() Stats { return g.c.Stats() }

// Close implements Canceller.
func (g *TailGate) Close() error { return g.c.Close() }

// power is the mean square of x counted over n samples (missing ones are silence, and
// so are samples that are not finite, as Stream gives them to the engine: one NaN
// would stay in the envelope for good).
func power(x []float32, n int) float64 {
	var e float64
	for _, v := range x {
		if p := float64(v) * float64(v); p <= math.MaxFloat64 {
			e += p
		}
	}
	return e / float64(n)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
