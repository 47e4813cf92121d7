// Package room simulates how a laptop's microphone picks up the laptop's own speakers:
// the agent's played audio goes through a delay, a gain and a synthetic room impulse
// response, and a noise floor may be added. Replays use it to reproduce self-echo
// without hardware.
//
// The impulse response has a direct path followed by a reverberant tail of Gaussian
// noise whose amplitude falls by 60 dB over RT60. The tail starts TailGap after the
// direct path (the first reflection, from the desk). Its energy relative to the direct
// path follows the diffuse-field relation for a speaker–microphone distance of
// Distance in a room of Volume: the critical distance is r_c = 0.057·√(V/RT60) (in m,
// m³, s), and the direct-to-reverberant ratio is 20·log10(r_c/Distance). For 20 cm in
// 50 m³ that is 11 dB at RT60 300 ms and 6 dB at 1 s. The whole response (direct path
// and tail) is then scaled so that its energy gain is GainDB: for a white signal the
// echo's power is the played power plus GainDB, so the path's echo return loss is
// -GainDB.
//
// A Path is deterministic (the tail and the noise come from Seed) and streaming: feed it
// the played audio block by block, with zeros while nothing plays, and it returns the
// microphone's echo sample-aligned with its input, carrying the delay line, the tail and
// the noise generator across blocks. A Path is owned by one goroutine.
package room

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/parley-voice/parley/audio"
)

// The room the reverberant energy is derived for (see the package comment).
const (
	Volume   = 50.0 // m³: a small office or living room
	Distance = 0.20 // m: laptop speaker to laptop microphone
	TailGap  = 2 * time.Millisecond
)

// Limits that keep a broken scenario from allocating absurd buffers.
const (
	MaxDelay = 2 * time.Second
	MaxRT60  = 3 * time.Second
	MinDB    = -120.0
)

// DefaultRate is the rate a zero Config.Rate stands for: the pipeline's.
const DefaultRate = audio.PipelineRate

// NoiseColor is the spectrum of the noise floor.
type NoiseColor uint8

const (
	// Pink noise (−3 dB per octave, like room and fan noise) is the default.
	Pink NoiseColor = iota
	White
)

// String returns "pink" or "white".
func (c NoiseColor) String() string {
	switch c {
	case Pink:
		return "pink"
	case White:
		return "white"
	}
	return fmt.Sprintf("NoiseColor(%d)", uint8(c))
}

// UnmarshalText accepts "pink" or "white", so configs can name the color.
func (c *NoiseColor) UnmarshalText(b []byte) error {
	switch string(b) {
	case "pink", "":
		*c = Pink
	case "white":
		*c = White
	default:
		return fmt.Errorf("room: noise color %q: want pink or white", b)
	}
	return nil
}

// Config describes the echo path; it is what a scenario's echo: block holds.
type Config struct {
	// Delay from the moment a sample is played to its direct path reaching the
	// microphone's samples (device buffers and the acoustic path), 0..MaxDelay.
	Delay time.Duration
	// GainDB is the energy gain of the whole echo path in dB, MinDB..0 (normally
	// negative: −6 dB is a loud laptop, −20 dB a quiet one).
	GainDB float64
	// RT60 is the room's reverberation time, 0..MaxRT60; 0 means no reverberation
	// (the direct path only).
	RT60 time.Duration
	// NoiseDB is the RMS level of the microphone's noise floor in dBFS, MinDB..0;
	// 0 means no noise (a full-scale noise floor is never wanted).
	NoiseDB float64
	// Noise is the color of the noise floor.
	Noise NoiseColor
	// Seed makes the impulse response and the noise; equal configs give equal output.
	Seed uint64
	// Rate of the audio in Hz; 0 means DefaultRate.
	Rate int
}

// Laptop is a loud laptop's echo path: its speakers reach its microphone 30 ms after
// playing, 6 dB down, through a room with a reverberation time of 300 ms. The tests and
// `agent bench --laptop` simulate it.
func Laptop() Config {
	return Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Seed: 1}
}

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("room: invalid echo path")

// Validate reports whether the config is usable, naming the field at fault.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.Delay < 0 || c.Delay > MaxDelay:
		return bad("delay %v: want 0 to %v", c.Delay, MaxDelay)
	case !(c.GainDB >= MinDB && c.GainDB <= 0):
		return bad("gain_db %g: want %g to 0", c.GainDB, MinDB)
	case c.RT60 < 0 || c.RT60 > MaxRT60:
		return bad("rt60 %v: want 0 to %v", c.RT60, MaxRT60)
	case !(c.NoiseDB >= MinDB && c.NoiseDB <= 0):
		return bad("noise_db %g: want %g to 0 (0: no noise)", c.NoiseDB, MinDB)
	case c.Noise != Pink && c.Noise != White:
		return bad("noise color %v", c.Noise)
	case c.Rate < 0 || c.Rate > 384000:
		return bad("rate %d Hz", c.Rate)
	}
	return nil
}

// DirectToReverbDB returns the energy ratio of the direct path to the reverberant tail
// for a reverberation time (see the package comment); +Inf without reverberation.
func DirectToReverbDB(rt60 time.Duration) float64 {
	if rt60 <= 0 {
		return math.Inf(1)
	}
	critical := 0.057 * math.Sqrt(Volume/rt60.Seconds())
	return 20 * math.Log10(critical/Distance)
}

// Path is a running echo path.
type Path struct {
	rate  int
	delay int
	// taps is the impulse response from the direct path on (the delay is not stored),
	// reversed so that the convolution walks taps and input in the same direction.
	taps []float32
	// hist holds the last delay+len(taps)-1 played samples; work is hist followed by
	// the block being processed.
	hist []float32
	work []float32
	// The noise floor; noiseRMS is 0 when there is none.
	noiseRMS float64
	noise    noiseSource
}

// New makes a Path.
func New(c Config) (*Path, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x726f6f6d)) // "room"
	h := impulseResponse(c, rng)
	taps := make([]float32, len(h))
	for i, v := range h {
		taps[len(h)-1-i] = float32(v)
	}
	p := &Path{
		rate:  c.Rate,
		delay: int(int64(c.Delay) * int64(c.Rate) / int64(time.Second)),
		taps:  taps,
	}
	p.hist = make([]float32, p.delay+len(taps)-1)
	if c.NoiseDB < 0 {
		p.noiseRMS = math.Pow(10, c.NoiseDB/20)
		// The noise has its own generator so that it does not depend on the tail length.
		p.noise = newNoise(c.Noise, rand.New(rand.NewPCG(c.Seed, 0x6e6f697365))) // "noise"
	}
	return p, nil
}

// impulseResponse builds the response from the direct path on, with energy gain GainDB.
func impulseResponse(c Config, rng *rand.Rand) []float64 {
	gap := int(int64(TailGap) * int64(c.Rate) / int64(time.Second))
	tailLen := int(int64(c.RT60) * int64(c.Rate) / int64(time.Second))
	if tailLen == 0 {
		return []float64{math.Pow(10, c.GainDB/20)}
	}
	h := make([]float64, gap+tailLen)
	h[0] = 1
	// The amplitude falls by 60 dB (a factor 1000) over tailLen samples.
	decay := math.Log(1000) / float64(tailLen)
	var tailEnergy float64
	for n := range tailLen {
		v := rng.NormFloat64() * math.Exp(-decay*float64(n))
		h[gap+n] = v
		tailEnergy += v * v
	}
	// Scale the tail to the direct-to-reverberant ratio, then everything to GainDB.
	tailScale := math.Sqrt(math.Pow(10, -DirectToReverbDB(c.RT60)/10) / tailEnergy)
	for n := gap; n < len(h); n++ {
		h[n] *= tailScale
	}
	var energy float64
	for _, v := range h {
		energy += v * v
	}
	scale := math.Pow(10, c.GainDB/20) / math.Sqrt(energy)
	for i := range h {
		h[i] *= scale
	}
	return h
}

// Rate returns the path's sample rate.
func (p *Path) Rate() int { return p.rate }

// ImpulseResponse returns a copy of the echo path's impulse response, the delay
// included (leading zeros), without the noise.
func (p *Path) ImpulseResponse() []float32 {
	h := make([]float32, p.delay+len(p.taps))
	for i, v := range p.taps {
		h[p.delay+len(p.taps)-1-i] = v
	}
	return h
}

// Process returns what the microphone picks up of played: the echo plus the noise
// floor, sample-aligned with played (the delay is inside the signal).
func (p *Path) Process(played []float32) []float32 {
	out := make([]float32, len(played))
	_ = p.AddTo(out, played) // equal lengths by construction
	return out
}

// AddTo adds the echo of played (and the noise floor) to mic, which must be as long:
// the way to put the agent's voice into a recording of the user.
func (p *Path) AddTo(mic, played []float32) error {
	if len(mic) != len(played) {
		return fmt.Errorf("room: %d microphone samples for %d played ones", len(mic), len(played))
	}
	k := len(p.hist)
	p.work = append(append(p.work[:0], p.hist...), played...)
	n := len(p.taps)
	for i := range played {
		// The sample at work[k+i] hears the direct path of work[k+i-delay] and the
		// tail of the samples before it.
		end := k + i - p.delay + 1
		mic[i] += dot(p.taps, p.work[end-n:end])
	}
	if p.noiseRMS > 0 {
		for i := range mic {
			mic[i] += float32(p.noiseRMS * p.noise.next())
		}
	}
	copy(p.hist, p.work[len(p.work)-k:])
	return nil
}

// dot is the inner product of two slices of equal length, unrolled for speed.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
