package audio

import (
	"errors"
	"fmt"
	"math"
)

// Mix adds gain × src into dst, with src[0] landing on dst[offset]. The parts of src that
// fall outside dst (offset may be negative) are left out, so callers can place a
// recording on a timeline block by block without bounds arithmetic. For interleaved
// audio, offset counts samples, not frames.
//
// Mix does not clip: float samples have headroom, and a sum above full scale is only a
// problem when it reaches an integer format or a sound card. Clip or LimitPeak before then.
func Mix(dst, src []float32, offset int, gain float32) {
	if offset < 0 {
		if -offset >= len(src) {
			return
		}
		src = src[-offset:]
		offset = 0
	}
	if offset >= len(dst) {
		return
	}
	dst = dst[offset:]
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	if gain == 1 {
		for i, s := range src {
			dst[i] += s
		}
		return
	}
	for i, s := range src {
		dst[i] += gain * s
	}
}

// MixFrames mixes frames of one rate and channel count into a new frame, each placed at
// its own Start. The result starts at the earliest Start and ends at the latest End;
// gaps between frames are silence. Nothing is clipped (see Mix).
func MixFrames(frames ...Frame) (Frame, error) {
	if len(frames) == 0 {
		return Frame{}, errors.New("audio: nothing to mix")
	}
	rate, channels := frames[0].Rate, frames[0].Channels
	if channels < 1 || rate < 1 {
		return Frame{}, fmt.Errorf("audio: cannot mix frames of %d Hz x%d", rate, channels)
	}
	start, end := frames[0].Start, frames[0].End()
	for i, f := range frames {
		if f.Rate != rate || f.Channels != channels {
			return Frame{}, fmt.Errorf("audio: frame %d is %d Hz x%d, frame 0 is %d Hz x%d; resample first", i, f.Rate, f.Channels, rate, channels)
		}
		if len(f.Samples)%channels != 0 {
			return Frame{}, fmt.Errorf("audio: frame %d holds %d samples, not whole frames of %d channels", i, len(f.Samples), channels)
		}
		start, end = min(start, f.Start), max(end, f.End())
	}
	out := Frame{Rate: rate, Channels: channels, Start: start, Samples: make([]float32, (end-start)*int64(channels))}
	for _, f := range frames {
		Mix(out.Samples, f.Samples, int(f.Start-start)*channels, 1)
	}
	return out, nil
}

// ApplyGain multiplies samples by gain in place.
func ApplyGain(samples []float32, gain float32) {
	for i := range samples {
		samples[i] *= gain
	}
}

// Clip limits samples to [-1, 1] in place and returns how many it had to change, so
// callers can warn about distortion instead of hiding it.
func Clip(samples []float32) int {
	clipped := 0
	for i, s := range samples {
		switch {
		case s > 1:
			samples[i] = 1
			clipped++
		case s < -1:
			samples[i] = -1
			clipped++
		}
	}
	return clipped
}

// LimitPeak scales samples down in place when their peak exceeds ceiling, so that the
// whole buffer keeps its shape (no clipping distortion). It returns the gain it applied
// (1 when the buffer was already within the ceiling). For whole buffers only: applied
// block by block it would pump the level.
func LimitPeak(samples []float32, ceiling float32) float32 {
	p := Peak(samples)
	if p <= ceiling || p == 0 {
		return 1
	}
	g := ceiling / p
	ApplyGain(samples, g)
	return g
}

// Peak returns the largest absolute sample value.
func Peak(samples []float32) float32 {
	var p float32
	for _, s := range samples {
		if s < 0 {
			s = -s
		}
		if s > p {
			p = s
		}
	}
	return p
}

// RMS returns the root-mean-square level of samples (0 for none). It sums in float64 so
// that hour-long buffers stay accurate.
func RMS(samples []float32) float64 {
	if len(samples) == 0 {
		return 0
	}
	var sum float64
	for _, s := range samples {
		sum += float64(s) * float64(s)
	}
	return math.Sqrt(sum / float64(len(samples)))
}

// DBFS converts a level relative to full scale (an RMS or a peak, 1.0 = full scale)
// into decibels: 20·log10(level). Silence is -Inf. By this convention a full-scale sine
// has an RMS of -3.01 dBFS.
func DBFS(level float64) float64 {
	if level <= 0 {
		return math.Inf(-1)
	}
	return 20 * math.Log10(level)
}

// GainFromDB converts decibels into a linear gain factor (-6 dB ≈ 0.5).
func GainFromDB(db float64) float32 {
	return float32(math.Pow(10, db/20))
}
