package audio

import (
	"fmt"
	"math"
	"time"
)

// Quality selects the resampler's anti-aliasing filter. Every level keeps aliases and
// images at least 80 dB down; higher levels keep more of the band near the Nyquist
// frequency of the lower rate and attenuate further, at the cost of longer filters.
type Quality int

const (
	// QualityDefault is QualityMedium.
	QualityDefault Quality = iota
	// QualityLow passes 80 % of the lower rate's Nyquist band and attenuates the rest
	// by at least 80 dB: plenty for speech recognition.
	QualityLow
	// QualityMedium passes 90 % and attenuates by at least 100 dB.
	QualityMedium
	// QualityHigh passes 95 % and attenuates by at least 120 dB.
	QualityHigh
)

func (q Quality) String() string {
	switch q {
	case QualityDefault:
		return "default"
	case QualityLow:
		return "low"
	case QualityMedium:
		return "medium"
	case QualityHigh:
		return "high"
	}
	return fmt.Sprintf("quality(%d)", int(q))
}

// Valid reports whether q is one of the defined quality levels.
func (q Quality) Valid() bool {
	_, err := q.spec()
	return err == nil
}

// filterSpec is a Quality's low-pass design: the passband edge as a fraction of the
// lower rate's Nyquist frequency (the stopband starts at that Nyquist frequency, so
// nothing that would alias survives), and the stopband attenuation in dB.
type filterSpec struct {
	passband    float64
	attenuation float64
}

func (q Quality) spec() (filterSpec, error) {
	switch q {
	case QualityLow:
		return filterSpec{passband: 0.80, attenuation: 80}, nil
	case QualityDefault, QualityMedium:
		return filterSpec{passband: 0.90, attenuation: 100}, nil
	case QualityHigh:
		return filterSpec{passband: 0.95, attenuation: 120}, nil
	}
	return filterSpec{}, fmt.Errorf("audio: unknown resampler quality %d", int(q))
}

// Resampler limits. Downsampling by more than maxDecimation would need filters of
// hundreds of thousands of taps; upsampling has no such cost and no limit.
const (
	maxDecimation = 256
	// maxExactPhases is the most filter phases kept for an exact rational ratio; ratios
	// with larger denominators interpolate between interpPhases tabulated phases.
	maxExactPhases = 1024
	interpPhases   = 512
	// maxTableCoeffs bounds the coefficient table (16 MiB of float32).
	maxTableCoeffs = 4 << 20
	// processBlock is how many frames ResampleFrame feeds at a time, so that a long
	// buffer is not copied whole into the filter's history.
	processBlock = 1 << 16
)

// Resampler converts a stream of interleaved float32 audio from one sample rate to
// another with a band-limited windowed-sinc filter (Kaiser window), evaluated in
// polyphase form: each output sample is one dot product of input history with the
// filter phase that matches its fractional position.
//
// Output sample j lies exactly at input position j·inRate/outRate: the filter's delay
// is compensated, so a click at input sample k comes out at output sample
// k·outRate/inRate, not a filter length later. The price is look-ahead: Process holds
// back about Delay() output samples until the input after them has arrived, and Flush
// releases them at the end of the stream (the input is taken to be silent before its
// start and after its end). A stream of N input frames gives ceil(N·outRate/inRate)
// output frames in total, however it was cut into Process calls, and the output is the
// same sample for sample.
//
// Ratios whose reduced denominator is small (all the usual rate pairs) use exact filter
// phases; others interpolate between finely tabulated phases. A Resampler is not safe
// for concurrent use.
type Resampler struct {
	inRate, outRate, channels int
	// Output j lies at input position j·down/up (the ratio in lowest terms).
	up, down int64
	half     int // taps on each side of the output position; a row has 2·half taps
	taps     int
	coeffs   []float32 // rows of taps coefficients, one per tabulated phase
	// tablePhases is the number of tabulated phases: up in exact mode, interpPhases (or
	// fewer for very long filters) in interpolated mode, which keeps one extra row.
	tablePhases int64
	interp      bool
	passthrough bool

	// Stream state. hist[c] holds channel c's input from absolute frame bufStart on
	// (negative positions are the silence before the stream).
	hist     [][]float32
	bufStart int64
	n        int64 // input frame at or before the next output position
	frac     int64 // the next output's position is n + frac/up
	inCount  int64 // input frames received since the stream began
	partial  []float32
}

// NewResampler returns a resampler from inRate to outRate for interleaved audio with
// the given number of channels.
func NewResampler(inRate, outRate, channels int, q Quality) (*Resampler, error) {
	if inRate < 1 || outRate < 1 || inRate > maxWAVRate || outRate > maxWAVRate {
		return nil, fmt.Errorf("audio: cannot resample %d Hz to %d Hz", inRate, outRate)
	}
	if channels < 1 || channels > maxWAVChannels {
		return nil, fmt.Errorf("audio: cannot resample %d channels", channels)
	}
	if inRate > outRate*maxDecimation {
		return nil, fmt.Errorf("audio: cannot resample %d Hz to %d Hz: more than %d:1", inRate, outRate, maxDecimation)
	}
	spec, err := q.spec()
	if err != nil {
		return nil, err
	}
	g := gcd(inRate, outRate)
	r := &Resampler{
		inRate: inRate, outRate: outRate, channels: channels,
		up: int64(outRate / g), down: int64(inRate / g),
	}
	if inRate == outRate {
		r.passthrough = true
		return r, nil
	}
	r.design(spec)
	r.hist = make([][]float32, channels)
	r.Reset()
	return r, nil
}

// design computes the filter: a low-pass at the lower rate's Nyquist frequency, in
// units of input samples, tabulated at the phases the ratio needs.
func (r *Resampler) design(spec filterSpec) {
	lower := float64(min(r.inRate, r.outRate))
	in := float64(r.inRate)
	// Band edges in cycles per input sample.
	pass := spec.passband * lower / 2 / in
	stop := lower / 2 / in
	fc := (pass + stop) / 2
	// Kaiser's estimates for the window: length from attenuation and transition width,
	// shape β from attenuation.
	length := (spec.attenuation-7.95)/(14.36*(stop-pass)) + 1
	beta := 0.1102 * (spec.attenuation - 8.7)
	halfLen := length / 2
	half := int(math.Ceil(halfLen))
	half += half & 1 // rows of a multiple of 4 taps suit the unrolled dot product
	r.half, r.taps = half, 2*half

	phases := r.up
	if phases > maxExactPhases || phases*int64(r.taps) > maxTableCoeffs {
		r.interp = true
		phases = int64(min(interpPhases, max(2, maxTableCoeffs/r.taps-1)))
	}
	r.tablePhases = phases
	rows := phases
	if r.interp {
		rows++ // the row for offset 1.0 closes the last interpolation interval
	}
	r.coeffs = make([]float32, rows*int64(r.taps))
	i0beta := besselI0(beta)
	for p := int64(0); p < rows; p++ {
		offset := float64(p) / float64(phases)
		row := r.coeffs[p*int64(r.taps) : (p+1)*int64(r.taps)]
		// Tap i multiplies input frame n-half+1+i for an output at n+offset, which lies
		// offset+half-1-i input samples after it.
		for i := range row {
			d := offset + float64(half-1-i)
			row[i] = float32(kaiserSinc(d, fc, halfLen, beta, i0beta))
		}
	}
}

// kaiserSinc is the windowed ideal low-pass with cutoff fc (cycles per sample) at
// distance d samples from its centre. Its taps at unit spacing sum to about 1, so it
// keeps the level whether it interpolates or decimates.
func kaiserSinc(d, fc, halfLen, beta, i0beta float64) float64 {
	if math.Abs(d) >= halfLen {
		return 0
	}
	x := d / halfLen
	w := besselI0(beta*math.Sqrt(1-x*x)) / i0beta
	arg := 2 * fc * d
	sinc := 1.0
	if arg != 0 {
		sinc = math.Sin(math.Pi*arg) / (math.Pi * arg)
	}
	return 2 * fc * sinc * w
}

// besselI0 is the modified Bessel function of the first kind, order 0, by its power
// series (which converges quickly for the β values of audio filters).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1.0; k < 500; k++ {
		term *= q / (k * k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// InRate returns the input sample rate.
func (r *Resampler) InRate() int { return r.inRate }

// OutRate returns the output sample rate.
func (r *Resampler) OutRate() int { return r.outRate }

// Channels returns the number of interleaved channels.
func (r *Resampler) Channels() int { return r.channels }

// Taps returns the filter length in input samples per output sample (0 for equal rates).
func (r *Resampler) Taps() int { return r.taps }

// Delay returns how many output frames Process holds back, at most, waiting for the
// input that follows them (the filter's look-ahead); Flush releases them. The output
// positions themselves are already compensated and do not lag the input.
func (r *Resampler) Delay() int {
	if r.passthrough {
		return 0
	}
	return int((int64(r.half)*r.up + r.down - 1) / r.down)
}

// Latency is Delay as a duration: how far behind real time the output runs when the
// input arrives in real time.
func (r *Resampler) Latency() time.Duration {
	return SamplesToDuration(int64(r.half), r.inRate)
}

// Reset forgets the stream so that the resampler can start a new one.
func (r *Resampler) Reset() {
	r.partial = r.partial[:0]
	r.inCount = 0
	r.n, r.frac = 0, 0
	if r.passthrough {
		return
	}
	// The first output needs half-1 frames before the stream's start: silence.
	r.bufStart = -int64(r.half - 1)
	for c := range r.hist {
		r.hist[c] = append(r.hist[c][:0], make([]float32, r.half-1)...)
	}
}

// Process resamples the next stretch of the stream and returns the output frames that
// are complete (a new slice, interleaved). in may end in the middle of a frame; the
// rest of that frame is expected at the start of the next call.
func (r *Resampler) Process(in []float32) []float32 {
	in = r.completeFrames(in)
	if r.passthrough {
		r.inCount += int64(len(in) / r.channels)
		return append([]float32(nil), in...)
	}
	if len(in) > 0 {
		r.append(in)
	}
	return r.produce(nil, false)
}

// Flush ends the stream: it returns the output frames still held back (the input is
// taken to be silent after its end) and resets the resampler for a new stream. An
// incomplete frame left over from Process is dropped.
func (r *Resampler) Flush() []float32 {
	var out []float32
	if !r.passthrough && r.inCount > 0 {
		// The last outputs need half frames after the end of the input: silence.
		for c := range r.hist {
			r.hist[c] = append(r.hist[c], make([]float32, r.half)...)
		}
		out = r.produce(nil, true)
	}
	r.Reset()
	return out
}

// completeFrames joins a partial frame left from the last call with in, keeps any new
// partial frame, and returns whole frames only.
func (r *Resampler) completeFrames(in []float32) []float32 {
	ch := r.channels
	if len(r.partial) > 0 {
		need := ch - len(r.partial)
		if len(in) < need {
			r.partial = append(r.partial, in...)
			return nil
		}
		joined := make([]float32, 0, len(in)+len(r.partial))
		joined = append(append(joined, r.partial...), in...)
		r.partial = r.partial[:0]
		in = joined
	}
	whole := len(in) / ch * ch
	r.partial = append(r.partial, in[whole:]...)
	return in[:whole]
}

// append drops history no output needs any more and appends in, de-interleaved.
func (r *Resampler) append(in []float32) {
	ch := r.channels
	if drop := min(r.n-int64(r.half)+1-r.bufStart, int64(len(r.hist[0]))); drop > 0 {
		for c := range r.hist {
			h := r.hist[c]
			r.hist[c] = h[:copy(h, h[drop:])]
		}
		r.bufStart += drop
	}
	frames := len(in) / ch
	for c := range r.hist {
		h := r.hist[c]
		start := len(h)
		h = grow(h, frames)
		dst := h[start:]
		if ch == 1 {
			copy(dst, in)
		} else {
			for i := range dst {
				dst[i] = in[i*ch+c]
			}
		}
		r.hist[c] = h
	}
	r.inCount += int64(frames)
}

// grow extends s by n elements, reusing its capacity when it can.
func grow(s []float32, n int) []float32 {
	if len(s)+n <= cap(s) {
		return s[:len(s)+n]
	}
	t := make([]float32, len(s)+n, 2*(len(s)+n))
	copy(t, s)
	return t
}

// produce computes every output whose filter window lies within the history; when
// flushing, only those whose position lies before the end of the input.
func (r *Resampler) produce(out []float32, flushing bool) []float32 {
	ch := r.channels
	bufEnd := r.bufStart + int64(len(r.hist[0]))
	half := int64(r.half)
	if avail := bufEnd - half - r.n; avail > 0 {
		out = make([]float32, 0, (avail*r.up/r.down+2)*int64(ch))
	}
	taps := r.taps
	for r.n+half < bufEnd && (!flushing || r.n < r.inCount) {
		off := int(r.n - half + 1 - r.bufStart)
		if r.interp {
			pos := r.frac * r.tablePhases
			p := pos / r.up
			a := float32(float64(pos%r.up) / float64(r.up))
			row0 := r.coeffs[p*int64(taps) : (p+1)*int64(taps)]
			row1 := r.coeffs[(p+1)*int64(taps) : (p+2)*int64(taps)]
			for c := 0; c < ch; c++ {
				x := r.hist[c][off : off+taps]
				y0 := dot(row0, x)
				out = append(out, y0+a*(dot(row1, x)-y0))
			}
		} else {
			row := r.coeffs[r.frac*int64(taps) : (r.frac+1)*int64(taps)]
			for c := 0; c < ch; c++ {
				out = append(out, dot(row, r.hist[c][off:off+taps]))
			}
		}
		r.frac += r.down
		r.n += r.frac / r.up
		r.frac %= r.up
	}
	return out
}

// dot is the inner product of two equally long vectors, in four independent partial
// sums so that the loop does not wait on one accumulator.
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

// ResampleFrame converts a whole frame to rate with the default quality. The result's
// Start is the same stream position expressed at the new rate.
func ResampleFrame(f Frame, rate int) (Frame, error) {
	if f.Channels < 1 || f.Rate < 1 {
		return Frame{}, fmt.Errorf("audio: cannot resample a frame of %d Hz x%d", f.Rate, f.Channels)
	}
	if len(f.Samples)%f.Channels != 0 {
		return Frame{}, fmt.Errorf("audio: frame holds %d samples, not whole frames of %d channels", len(f.Samples), f.Channels)
	}
	r, err := NewResampler(f.Rate, rate, f.Channels, QualityDefault)
	if err != nil {
		return Frame{}, err
	}
	out := Frame{Rate: rate, Channels: f.Channels, Start: rescale(f.Start, f.Rate, rate)}
	total := (int64(f.Len())*r.up + r.down - 1) / r.down
	out.Samples = make([]float32, 0, total*int64(f.Channels))
	block := processBlock * f.Channels
	for s := f.Samples; len(s) > 0; {
		n := min(len(s), block)
		out.Samples = append(out.Samples, r.Process(s[:n])...)
		s = s[n:]
	}
	out.Samples = append(out.Samples, r.Flush()...)
	return out, nil
}

// rescale converts a sample position from one rate to another, rounding to nearest.
func rescale(pos int64, from, to int) int64 {
	if from == to {
		return pos
	}
	return int64(math.Round(float64(pos) * float64(to) / float64(from)))
}

// Downmix averages the channels of f into mono. Averaging rather than summing keeps
// the level of a centred source and can never clip.
func Downmix(f Frame) Frame {
	if f.Channels <= 1 {
		return f
	}
	ch := f.Channels
	out := Frame{Rate: f.Rate, Channels: 1, Start: f.Start, Samples: make([]float32, len(f.Samples)/ch)}
	scale := 1 / float32(ch)
	for i := range out.Samples {
		var sum float32
		for _, s := range f.Samples[i*ch : i*ch+ch] {
			sum += s
		}
		out.Samples[i] = sum * scale
	}
	return out
}

// ToPipeline converts f to the pipeline's format: mono at PipelineRate (down-mixed
// first, so only one channel goes through the filter).
func ToPipeline(f Frame) (Frame, error) {
	if f.Channels < 1 || f.Rate < 1 {
		return Frame{}, fmt.Errorf("audio: cannot convert a frame of %d Hz x%d", f.Rate, f.Channels)
	}
	return ResampleFrame(Downmix(f), PipelineRate)
}
