// Package pitch computes the normalised autocorrelation of a frame over the lags of a
// voice's pitch periods: the measure that both the overlap module's voicing (is this
// sound voiced?) and the prosody tracker's pitch (which period?) read.
package pitch

import "math"

// Correlator computes the normalised autocorrelation of frames over a range of lags.
// It keeps its scratch space between calls: one per goroutine.
type Correlator struct {
	minLag, maxLag int
	power, corr    []float64
}

// NewCorrelator returns a correlator for lags minLag to maxLag (in samples).
func NewCorrelator(minLag, maxLag int) *Correlator {
	return &Correlator{minLag: minLag, maxLag: maxLag, corr: make([]float64, maxLag+1)}
}

// Correlate returns, indexed by lag, x's normalised autocorrelation: for each lag of the
// correlator's range that leaves at least minOverlap samples compared, the product of x
// with itself lag samples later over the geometric mean of the two parts' energies (0
// where either part is silent); 0 at every other index, and at every lag of a silent
// frame. The slice is reused by the next call.
func (c *Correlator) Correlate(x []float64, minOverlap int) []float64 {
	n := len(x)
	if cap(c.power) < n+1 {
		c.power = make([]float64, n+1)
	}
	power := c.power[:n+1]
	// power[i] is the energy of x[:i]: each lag's two energies from it, in O(1).
	power[0] = 0
	for i, v := range x {
		power[i+1] = power[i] + v*v
	}
	clear(c.corr)
	if power[n] == 0 {
		return c.corr // silence (common in replays) costs nothing more
	}
	for lag := c.minLag; lag <= c.maxLag && lag <= n-max(minOverlap, 1); lag++ {
		var r float64
		for i, v := range x[:n-lag] {
			r += v * x[i+lag]
		}
		if e0, e1 := power[n-lag], power[n]-power[lag]; e0 > 0 && e1 > 0 {
			c.corr[lag] = r / math.Sqrt(e0*e1)
		}
	}
	return c.corr
}
