package pitch

import "math"

// Vowel synthesises n samples at rate of an open vowel ("ah"): a pulse train whose pitch
// glides from f0 to f1 Hz through three formant resonators (700, 1200 and 2600 Hz). It is
// the voice with a known pitch that tests of voicing and pitch analyse; its level is
// the resonators' (around 1), for the caller to scale.
func Vowel(rate int, f0, f1 float64, n int) []float64 {
	type resonator struct{ a1, a2, g, y1, y2 float64 }
	mk := func(f, bw float64) *resonator {
		r := math.Exp(-math.Pi * bw / float64(rate))
		return &resonator{a1: 2 * r * math.Cos(2*math.Pi*f/float64(rate)), a2: -r * r, g: 1 - r}
	}
	rs := []*resonator{mk(700, 80), mk(1200, 90), mk(2600, 120)}
	gains := []float64{1, 0.7, 0.3}
	out := make([]float64, n)
	phase := 0.0
	for i := range out {
		phase += (f0 + (f1-f0)*float64(i)/float64(n)) / float64(rate)
		src := 0.0
		if phase >= 1 {
			phase--
			src = 1
		}
		for j, r := range rs {
			y := r.g*src + r.a1*r.y1 + r.a2*r.y2
			r.y2, r.y1 = r.y1, y
			out[i] += gains[j] * y
		}
	}
	return out
}
