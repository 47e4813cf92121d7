package pitch

import (
	"math"
	"testing"
)

// TestCorrelateAsDefined: every lag's value is the definition's, computed directly, and
// lags outside the range or with too little overlap are 0.
func TestCorrelateAsDefined(t *testing.T) {
	x := Vowel(16000, 120, 150, 400)
	c := NewCorrelator(40, 228)
	for _, minOverlap := range []int{1, 160} {
		got := c.Correlate(x, minOverlap)
		for lag := range got {
			want := 0.0
			if lag >= 40 && lag <= len(x)-minOverlap {
				var r, e0, e1 float64
				for i := 0; i+lag < len(x); i++ {
					r += x[i] * x[i+lag]
					e0 += x[i] * x[i]
					e1 += x[i+lag] * x[i+lag]
				}
				want = r / math.Sqrt(e0*e1)
			}
			if math.Abs(got[lag]-want) > 1e-9 {
				t.Fatalf("minOverlap %d, lag %d: %v, want %v", minOverlap, lag, got[lag], want)
			}
		}
	}
}

// TestSilenceCorrelatesNowhere: a silent frame's correlation is 0 at every lag.
func TestSilenceCorrelatesNowhere(t *testing.T) {
	c := NewCorrelator(40, 228)
	c.Correlate(Vowel(16000, 120, 120, 400), 1) // leaves values behind
	for lag, v := range c.Correlate(make([]float64, 400), 1) {
		if v != 0 {
			t.Fatalf("lag %d: %v", lag, v)
		}
	}
}

// TestVowelPeaksAtItsPeriod: a steady vowel's correlation is highest at its period.
func TestVowelPeaksAtItsPeriod(t *testing.T) {
	for _, hz := range []float64{80, 125, 200, 320} {
		corr := NewCorrelator(40, 228).Correlate(Vowel(16000, hz, hz, 640), 1)
		best := 40
		for lag := range corr {
			if corr[lag] > corr[best]+1e-6 {
				best = lag
			}
		}
		// The period or a multiple of it, for a steady pulse train.
		if period := 16000 / hz; math.Abs(math.Remainder(float64(best), period)) > 1.5 {
			t.Errorf("%v Hz: peak at lag %d, period %.1f", hz, best, period)
		}
	}
}
