package room

import (
	"math"
	"math/rand/v2"
)

// noiseSource yields noise samples of unit RMS.
type noiseSource interface{ next() float64 }

func newNoise(c NoiseColor, rng *rand.Rand) noiseSource {
	if c == White {
		return whiteNoise{rng}
	}
	return newPinkNoise(rng)
}

type whiteNoise struct{ rng *rand.Rand }

func (w whiteNoise) next() float64 { return w.rng.NormFloat64() }

// pinkNoise filters white noise through a three-pole, three-zero filter whose response
// stays within about ±0.5 dB of −3 dB/octave over the audio band (the coefficients are
// the well-known design from J. O. Smith's "Spectral Audio Signal Processing").
type pinkNoise struct {
	rng   *rand.Rand
	x, y  [3]float64 // past inputs and outputs, newest first
	scale float64    // makes the output unit RMS
}

var (
	pinkB = [4]float64{0.049922035, -0.095993537, 0.050612699, -0.004408786}
	pinkA = [3]float64{-2.494956002, 2.017265875, -0.522189400} // a1..a3 (a0 = 1)
)

func newPinkNoise(rng *rand.Rand) *pinkNoise {
	// The output power for unit white input is the energy of the impulse response; its
	// slowest pole (0.9986) has decayed by far more than 100 dB after 2^18 samples.
	var probe pinkNoise
	var energy float64
	for n := range 1 << 18 {
		in := 0.0
		if n == 0 {
			in = 1
		}
		v := probe.filter(in)
		energy += v * v
	}
	return &pinkNoise{rng: rng, scale: 1 / math.Sqrt(energy)}
}

func (p *pinkNoise) filter(in float64) float64 {
	out := pinkB[0]*in + pinkB[1]*p.x[0] + pinkB[2]*p.x[1] + pinkB[3]*p.x[2] -
		pinkA[0]*p.y[0] - pinkA[1]*p.y[1] - pinkA[2]*p.y[2]
	p.x = [3]float64{in, p.x[0], p.x[1]}
	p.y = [3]float64{out, p.y[0], p.y[1]}
	return out
}

func (p *pinkNoise) next() float64 { return p.scale * p.filter(p.rng.NormFloat64()) }
