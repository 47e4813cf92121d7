package overlap

import (
	"math"
	"math/cmplx"
	"slices"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/pitch"
)

// The acoustic analysis runs on 16 kHz audio in frames of frameLen samples every hop
// samples, each windowed and transformed with an fftLen-point FFT.
const (
	sampleRate = audio.PipelineRate
	frameLen   = 400 // 25 ms
	hop        = 160 // 10 ms
	fftLen     = 512
	// minLag and maxLag bound the pitch periods voicing looks for: 400 Hz down to 70 Hz.
	minLag = sampleRate / 400
	maxLag = sampleRate / 70
	// minOverlap is the least a lag's correlation compares: 10 ms.
	minOverlap = 160
)

// Frame holds the features of one analysis frame.
type Frame struct {
	// Level is the frame's mean square in dB full scale.
	Level float64
	// Voicing is the peak of the normalised autocorrelation at pitch lags: near 1 for a
	// steady voice, low for noise, clicks and silence.
	Voicing float64
	// Low is the share of the frame's power below 500 Hz: a hummed nasal ("mm", "hmm")
	// puts nearly all its power there; vowels and consonants spread theirs up to the
	// formants and frication above 1 kHz.
	Low float64
	// High is the share of the power above 2.5 kHz (frication, bursts, noise).
	High float64
	// Tilt is the power from 1 to 4 kHz relative to the power below 500 Hz, in dB: a
	// closed-mouth hum sits 30 dB or more down, open vowels and consonants far less.
	Tilt float64
	// Flatness is the spectral flatness from 100 Hz to 6 kHz (geometric over
	// arithmetic mean of the power): near 1 for noise, low for harmonic sounds.
	Flatness float64
	// Flux is the change of the log spectrum since the previous frame (mean absolute
	// difference in dB over 100 Hz–4 kHz): articulation moves the spectrum, a hum and a
	// held vowel hardly do.
	Flux float64
}

// analyzer turns a stream of samples into frames. It is owned by one goroutine and
// allocates only when it is made.
type analyzer struct {
	buf     []float32 // samples not yet consumed by a frame (at most frameLen-1+hop)
	window  []float64
	re      []complex128
	logSpec []float64
	prevLog []float64
	hasPrev bool
	x       []float64
	pitch   *pitch.Correlator
}

func newAnalyzer() *analyzer {
	a := &analyzer{
		window:  make([]float64, frameLen),
		re:      make([]complex128, fftLen),
		logSpec: make([]float64, fftLen/2+1),
		prevLog: make([]float64, fftLen/2+1),
		x:       make([]float64, frameLen),
		pitch:   pitch.NewCorrelator(minLag, maxLag),
	}
	for i := range a.window {
		a.window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(frameLen-1))
	}
	return a
}

// push adds samples and calls emit for every frame they complete.
func (a *analyzer) push(samples []float32, emit func(Frame)) {
	a.buf = append(a.buf, samples...)
	for len(a.buf) >= frameLen {
		emit(a.frame(a.buf[:frameLen]))
		a.buf = a.buf[hop:]
	}
	// Keep the buffer from growing: move the tail to the front.
	if cap(a.buf) > 8*frameLen {
		a.buf = append(make([]float32, 0, 2*frameLen), a.buf...)
	}
}

func (a *analyzer) frame(s []float32) Frame {
	var f Frame
	var mean float64
	for _, v := range s {
		mean += float64(v)
	}
	mean /= float64(len(s))
	var energy float64
	for i, v := range s {
		x := float64(v) - mean
		a.x[i] = x
		energy += x * x
	}
	ms := energy / float64(len(s))
	f.Level = 10 * math.Log10(ms+1e-12)
	f.Voicing = voicing(a.pitch, a.x)

	for i := range a.re {
		if i < frameLen {
			a.re[i] = complex(a.x[i]*a.window[i], 0)
		} else {
			a.re[i] = 0
		}
	}
	fft(a.re)
	binHz := float64(sampleRate) / fftLen
	var mid float64
	var total, low, high, logSum, linSum, flux float64
	var nFlat, nFlux int
	for k := 1; k <= fftLen/2; k++ {
		p := real(a.re[k])*real(a.re[k]) + imag(a.re[k])*imag(a.re[k])
		hz := float64(k) * binHz
		total += p
		if hz < 500 {
			low += p
		}
		if hz >= 2500 {
			high += p
		}
		if hz >= 1000 && hz < 4000 {
			mid += p
		}
		l := 10 * math.Log10(p+1e-10)
		a.logSpec[k] = l
		if hz >= 100 && hz <= 6000 {
			logSum += math.Log(p + 1e-12)
			linSum += p
			nFlat++
		}
		if hz >= 100 && hz <= 4000 {
			if a.hasPrev {
				flux += math.Abs(l - a.prevLog[k])
			}
			nFlux++
		}
	}
	if total > 0 {
		f.Low, f.High = low/total, high/total
	}
	f.Tilt = 10 * math.Log10((mid+1e-12)/(low+1e-12))
	if nFlat > 0 && linSum > 0 {
		f.Flatness = math.Exp(logSum/float64(nFlat)) / (linSum / float64(nFlat))
	}
	if a.hasPrev && nFlux > 0 {
		f.Flux = flux / float64(nFlux)
	}
	copy(a.prevLog, a.logSpec)
	a.hasPrev = true
	return f
}

// voicing returns the peak normalised autocorrelation of x over pitch lags: lags up to
// maxLag, with at least minOverlap samples compared (a deep voice's period is longer
// than half the frame).
func voicing(pc *pitch.Correlator, x []float64) float64 {
	return slices.Max(pc.Correlate(x, minOverlap))
}

// fft transforms x in place (len(x) a power of two).
func fft(x []complex128) {
	n := len(x)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		w := cmplx.Exp(complex(0, -2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			wk := complex(1, 0)
			for k := 0; k < size/2; k++ {
				u := x[start+k]
				v := x[start+k+size/2] * wk
				x[start+k] = u + v
				x[start+k+size/2] = u - v
				wk *= w
			}
		}
	}
}

// Thresholds of the acoustic judgement.
const (
	// activeRange: frames more than this far below the sound's peak (dB) are not part of
	// it; floorDB: nor are frames below this level (dBFS).
	activeRange = 30.0
	floorDB     = -65.0
	// endRange: the sound has stopped where its level stays this far (dB) below its peak.
	endRange = 20.0
	// voicedAt: a frame is voiced when its normalised autocorrelation reaches this.
	voicedAt = 0.6
	// A voiced frame sounds hummed when its 1–4 kHz power is humTilt dB or more below its
	// power under 500 Hz and it has (almost) no power above 2.5 kHz.
	humTilt = -22.0
	humHigh = 0.02
	// A frame is sustained when it lies within sustainRange dB of the loudest frame of
	// the sustainFrames frames up to it: a voice holds its level through a syllable, a
	// knock or a click decays at once.
	sustainRange  = 10.0
	sustainFrames = 15
	// minFrames is how many active frames a judgement needs.
	minFrames = 8
)

// acoustics accumulates the frames of one sound and judges it.
type acoustics struct {
	frames []Frame
	peak   float64
}

func (a *acoustics) add(f Frame) {
	a.frames = append(a.frames, f)
	if len(a.frames) == 1 || f.Level > a.peak {
		a.peak = f.Level
	}
}

func (a *acoustics) active(f Frame) bool {
	return f.Level >= floorDB && f.Level >= a.peak-activeRange
}

// judge returns the sound's kind, the share of its active frames that are voiced and
// the share of the voiced ones that sound hummed.
func (a *acoustics) judge() (s Sound, voiced, humLike float64) {
	var n, nv, nh, ns int
	for i, f := range a.frames {
		if !a.active(f) {
			continue
		}
		n++
		local := f.Level
		for j := max(0, i-sustainFrames+1); j < i; j++ {
			local = max(local, a.frames[j].Level)
		}
		if f.Level >= local-sustainRange {
			ns++
		}
		if f.Voicing >= voicedAt {
			nv++
			if f.Tilt <= humTilt && f.High <= humHigh {
				nh++
			}
		}
	}
	if n == 0 {
		return Unknown, 0, 0
	}
	voiced = float64(nv) / float64(n)
	if nv > 0 {
		humLike = float64(nh) / float64(nv)
	}
	switch {
	case n < minFrames:
		return Unknown, voiced, humLike
	case voiced < 0.35, float64(ns)/float64(n) < 0.5:
		return Noise, voiced, humLike
	case humLike >= 0.8:
		return Hum, voiced, humLike
	}
	return Voice, voiced, humLike
}

// quietFrames returns how many frames at the end of the sound lie endRange dB or more
// below its peak (the sound may have ended where they start).
func (a *acoustics) quietFrames() int {
	k := 0
	for i := len(a.frames) - 1; i >= 0 && (a.frames[i].Level < a.peak-endRange || a.frames[i].Level < floorDB); i-- {
		k++
	}
	return k
}
