package pulsetest

import "math"

// Find locates needle in haystack by normalised cross-correlation and returns the
// offset in haystack where needle fits best and the correlation there (1 for an exact,
// scaled copy). It searches a decimated copy first and refines at full rate, so it is
// fast enough for seconds of audio in tests. Both must have the same sample rate.
func Find(haystack, needle []float32) (offset int, corr float64) {
	if len(needle) == 0 || len(haystack) < len(needle) {
		return 0, 0
	}
	const dec = 8
	h, n := decimate(haystack, dec), decimate(needle, dec)
	best, bestCorr := 0, math.Inf(-1)
	for off := 0; off+len(n) <= len(h); off++ {
		if c := correlate(h[off:off+len(n)], n); c > bestCorr {
			best, bestCorr = off, c
		}
	}
	lo, hi := max(0, best*dec-2*dec), min(len(haystack)-len(needle), best*dec+2*dec)
	offset, corr = lo, math.Inf(-1)
	for off := lo; off <= hi; off++ {
		if c := correlate(haystack[off:off+len(needle)], needle); c > corr {
			offset, corr = off, c
		}
	}
	return offset, corr
}

// decimate averages blocks of k samples.
func decimate(x []float32, k int) []float32 {
	out := make([]float32, len(x)/k)
	for i := range out {
		var s float32
		for _, v := range x[i*k : (i+1)*k] {
			s += v
		}
		out[i] = s / float32(k)
	}
	return out
}

func correlate(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range b {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// Onsets returns the sample indices where x first exceeds threshold in magnitude after
// at least gap samples below it: the starts of bursts.
func Onsets(x []float32, threshold float32, gap int) []int {
	var out []int
	quiet := gap // samples below the threshold so far; the signal starts "after silence"
	for i, v := range x {
		if v > threshold || v < -threshold {
			if quiet >= gap {
				out = append(out, i)
			}
			quiet = 0
			continue
		}
		quiet++
	}
	return out
}
