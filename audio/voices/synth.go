package voices

import (
	"math"
	"math/rand/v2"
)

// The synthesised sounds stand in for what text-to-speech cannot make: a real hummed
// "mm-hmm" (a voice through a closed mouth: a glottal pulse train through the nasal
// tract's resonances, with the pitch contour of an acknowledgement), a cough, a knock
// on a table, a short burst of noise, a room's steady noise. Each is deterministic for
// its seed.

// HumShape is one of the hummed acknowledgements Hum makes.
type HumShape int

const (
	// MmHmm is two hums, the second rising: "mm-HMM".
	MmHmm HumShape = iota
	// Hmm is one hum with a falling pitch.
	Hmm
	// Mhm is a short hum, a breathy gap and a longer, rising hum.
	Mhm
)

func (h HumShape) String() string {
	switch h {
	case MmHmm:
		return "mm-hmm"
	case Hmm:
		return "hmm"
	case Mhm:
		return "mhm"
	}
	return "hum?"
}

// hummer is a voice with its mouth closed: glottal pulses at a gliding pitch through
// two-pole resonators at the nasal murmur's resonances (about 250 Hz strong, 1 kHz and
// 2.2 kHz weak), which is why a hum's energy sits below 500 Hz.
type hummer struct {
	phase float64
	res   []*resonator
	gains []float64
}

func newHummer() *hummer {
	return &hummer{
		res:   []*resonator{newResonator(250, 60), newResonator(1000, 150), newResonator(2200, 250)},
		gains: []float64{1, 0.08, 0.03},
	}
}

// sample returns the next sample at pitch f0 Hz.
func (h *hummer) sample(f0 float64) float64 {
	h.phase += f0 / Rate
	var src float64
	if h.phase >= 1 {
		h.phase -= 1
		src = 1 // a glottal pulse
	}
	var out float64
	for i, r := range h.res {
		out += h.gains[i] * r.next(src)
	}
	return out
}

// resonator is a two-pole resonance at freq Hz with bandwidth bw Hz, normalised to unit
// gain at its peak.
type resonator struct {
	a1, a2, g float64
	y1, y2    float64
}

func newResonator(freq, bw float64) *resonator {
	r := math.Exp(-math.Pi * bw / Rate)
	theta := 2 * math.Pi * freq / Rate
	return &resonator{a1: 2 * r * math.Cos(theta), a2: -r * r, g: 1 - r}
}

func (r *resonator) next(x float64) float64 {
	y := r.g*x + r.a1*r.y1 + r.a2*r.y2
	r.y2, r.y1 = r.y1, y
	return y
}

// hum is one voiced stretch: duration, pitch from f0a to f0b.
type hum struct {
	dur      float64 // seconds
	f0a, f0b float64
	gap      float64 // silence (breath) after it, seconds
}

// Hum synthesises a hummed acknowledgement at a base pitch f0 (Hz; a low male voice is
// about 100, a female voice about 200), peak-normalised to level (0–1).
func Hum(shape HumShape, f0, level float64) []float32 {
	var parts []hum
	switch shape {
	case MmHmm:
		parts = []hum{{0.22, f0 * 1.05, f0, 0.09}, {0.32, f0 * 0.95, f0 * 1.3, 0}}
	case Hmm:
		parts = []hum{{0.45, f0 * 1.15, f0 * 0.85, 0}}
	case Mhm:
		parts = []hum{{0.12, f0, f0, 0.07}, {0.35, f0 * 0.95, f0 * 1.25, 0}}
	}
	h := newHummer()
	var out []float64
	for _, p := range parts {
		n := int(p.dur * Rate)
		for i := 0; i < n; i++ {
			t := float64(i) / float64(n)
			f := p.f0a + (p.f0b-p.f0a)*t
			out = append(out, h.sample(f)*envelope(i, n, 0.03*Rate, 0.05*Rate))
		}
		for i := 0; i < int(p.gap*Rate); i++ {
			out = append(out, h.sample(p.f0b)*0) // the resonators ring out in the gap
		}
	}
	return normalise(out, level)
}

// envelope rises over attack samples and falls over release samples (raised cosines).
func envelope(i, n int, attack, release float64) float64 {
	e := 1.0
	if fi := float64(i); fi < attack {
		e = 0.5 - 0.5*math.Cos(math.Pi*fi/attack)
	}
	if rest := float64(n - i); rest < release {
		e *= 0.5 - 0.5*math.Cos(math.Pi*rest/release)
	}
	return e
}

// Cough synthesises a cough: a sharp burst of band-limited noise (300 Hz–3 kHz, shaped
// by a throat resonance) decaying over about 250 ms, sometimes with a weaker second burst.
func Cough(seed uint64, level float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x636f756768))
	bursts := []struct{ at, dur, amp float64 }{{0, 0.25, 1}}
	if rng.IntN(2) == 1 {
		bursts = append(bursts, struct{ at, dur, amp float64 }{0.32, 0.18, 0.6})
	}
	total := bursts[len(bursts)-1].at + bursts[len(bursts)-1].dur + 0.02
	out := make([]float64, int(total*Rate))
	lo, hi := newResonator(500+rng.Float64()*300, 400), newResonator(1500+rng.Float64()*800, 900)
	for _, b := range bursts {
		start, n := int(b.at*Rate), int(b.dur*Rate)
		for i := 0; i < n && start+i < len(out); i++ {
			t := float64(i) / Rate
			env := b.amp * (1 - math.Exp(-t/0.006)) * math.Exp(-t/0.07)
			x := rng.NormFloat64()
			out[start+i] += env * (lo.next(x) + 0.6*hi.next(x))
		}
	}
	return normalise(out, level)
}

// Knock synthesises knocks on a table: n decaying resonant impulses (a wooden body
// around 200–700 Hz, 20–40 ms decay) spaced 120–200 ms apart.
func Knock(seed uint64, n int, level float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x6b6e6f636b))
	spacing := 0.12 + rng.Float64()*0.08
	total := float64(n-1)*spacing + 0.25
	out := make([]float64, int(total*Rate))
	modes := []struct{ f, decay, amp float64 }{
		{200 + rng.Float64()*100, 0.04, 1}, {450 + rng.Float64()*150, 0.025, 0.7}, {900 + rng.Float64()*300, 0.012, 0.4},
	}
	for k := 0; k < n; k++ {
		start := int(float64(k) * spacing * Rate)
		amp := 1 - 0.15*float64(k)
		for i := 0; start+i < len(out); i++ {
			t := float64(i) / Rate
			var v float64
			for _, m := range modes {
				v += m.amp * math.Exp(-t/m.decay) * math.Sin(2*math.Pi*m.f*t)
			}
			if i < 40 { // the contact click
				v += 0.5 * rng.NormFloat64() * (1 - float64(i)/40)
			}
			out[start+i] += amp * v
		}
	}
	return normalise(out, level)
}

// Noise synthesises a short burst of white noise (a rustle, a clap-like sound) of dur
// seconds with a 5 ms attack and an exponential decay.
func Noise(seed uint64, dur, level float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x6e6f697365))
	n := int(dur * Rate)
	out := make([]float64, n)
	for i := range out {
		t := float64(i) / Rate
		out[i] = rng.NormFloat64() * (1 - math.Exp(-t/0.005)) * math.Exp(-t/(dur/3))
	}
	return normalise(out, level)
}

// Room synthesises dur seconds of a room's steady noise (ventilation, traffic through a
// window): pink noise, its level drifting by a few dB over seconds, with 50 ms fades at
// both ends. Its RMS level is level (a steady noise is described by its RMS; its peaks
// are random).
func Room(seed uint64, dur, level float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x726f6f6d))
	n := int(dur * Rate)
	out := make([]float64, n)
	// Paul Kellet's economy pink filter over white noise.
	var b0, b1, b2 float64
	drift := 2 * math.Pi * (0.1 + 0.2*rng.Float64()) // rad/s: a drift period of 3–10 s
	phase := 2 * math.Pi * rng.Float64()
	for i := range out {
		w := rng.NormFloat64()
		b0 = 0.99765*b0 + w*0.0990460
		b1 = 0.96300*b1 + w*0.2965164
		b2 = 0.57000*b2 + w*1.0526913
		t := float64(i) / Rate
		out[i] = (b0 + b1 + b2 + w*0.1848) * (1 + 0.25*math.Sin(drift*t+phase)) * envelope(i, n, 0.05*Rate, 0.05*Rate)
	}
	var sum float64
	for _, v := range out {
		sum += v * v
	}
	res := make([]float32, n)
	if sum == 0 {
		return res
	}
	g := level / math.Sqrt(sum/float64(n))
	for i, v := range out {
		res[i] = float32(v * g)
	}
	return res
}

func normalise(x []float64, level float64) []float32 {
	peak := 0.0
	for _, v := range x {
		peak = max(peak, math.Abs(v))
	}
	out := make([]float32, len(x))
	if peak == 0 {
		return out
	}
	for i, v := range x {
		out[i] = float32(v / peak * level)
	}
	return out
}
