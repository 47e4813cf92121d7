package audio

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// ratePairs are the conversions the pipeline meets, plus ratios that exercise the
// interpolated-phase path (reduced denominators too large to tabulate exactly).
var ratePairs = []struct{ in, out int }{
	{44100, 16000},
	{48000, 16000},
	{24000, 16000},
	{22050, 48000},
	{16000, 44100},
	{8000, 16000},
	{16000, 8000},
	{44100, 48000},
	{48000, 44100},
	{32000, 16000},
	{11025, 16000},
	{44100, 16001}, // interpolated phases
	{16001, 44100}, // interpolated phases, upsampling
	{96000, 16000},
	{16000, 16000},
}

func sine(n, rate int, freq, amp float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return s
}

// goertzel returns the amplitude of the component at freq in x, with a Hann window so
// that other components leak little into the measurement.
func goertzel(x []float32, freq float64, rate int) float64 {
	n := len(x)
	w := 2 * math.Pi * freq / float64(rate)
	coeff := 2 * math.Cos(w)
	var s1, s2, wsum float64
	for i, v := range x {
		win := 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n-1))
		wsum += win
		s0 := win*float64(v) + coeff*s1 - s2
		s2, s1 = s1, s0
	}
	// The DFT value at w from the recurrence's last two states.
	y := complex(s1, 0) - cmplx.Exp(complex(0, -w))*complex(s2, 0)
	return 2 * cmplx.Abs(y) / wsum
}

// interior cuts off the edges where the filter sees the silence around the stream.
func interior(x []float32, edge int) []float32 {
	if 2*edge >= len(x) {
		return nil
	}
	return x[edge : len(x)-edge]
}

func resampleAll(t testing.TB, in []float32, inRate, outRate, channels int, q Quality) []float32 {
	t.Helper()
	r, err := NewResampler(inRate, outRate, channels, q)
	if err != nil {
		t.Fatal(err)
	}
	out := r.Process(in)
	return append(out, r.Flush()...)
}

func TestResamplePreservesSine(t *testing.T) {
	for _, p := range ratePairs {
		lower := float64(min(p.in, p.out))
		for _, freq := range []float64{440, 0.35 * lower, 0.75 * lower / 2} {
			t.Run(fmt.Sprintf("%d-%d/%.0fHz", p.in, p.out, freq), func(t *testing.T) {
				const amp = 0.5
				in := sine(p.in/2, p.in, freq, amp) // half a second
				out := resampleAll(t, in, p.in, p.out, 1, QualityDefault)
				mid := interior(out, p.out/20)
				got := goertzel(mid, freq, p.out)
				if db := DBFS(got / amp); math.Abs(db) > 0.01 {
					t.Errorf("amplitude %.6f (%.4f dB), want %.2f", got, db, amp)
				}
				// The output must be the same sine sampled at the new rate, in phase:
				// this checks frequency, amplitude and the delay compensation at once.
				edge := p.out / 20
				var worst float64
				for j := edge; j < len(out)-edge; j++ {
					want := amp * math.Sin(2*math.Pi*freq*float64(j)/float64(p.out))
					worst = math.Max(worst, math.Abs(float64(out[j])-want))
				}
				if db := DBFS(worst / amp); db > -80 {
					t.Errorf("largest deviation from the ideal sine %.2e (%.1f dB), want below -80 dB", worst, db)
				}
			})
		}
	}
}

func TestResampleSuppressesAliases(t *testing.T) {
	for _, p := range ratePairs {
		if p.out >= p.in {
			continue
		}
		for _, q := range []Quality{QualityLow, QualityMedium, QualityHigh} {
			spec, _ := q.spec()
			nyq := float64(p.out) / 2
			// Tones above the new Nyquist frequency, up to the old one.
			for _, freq := range []float64{nyq * 1.02, nyq * 1.3, nyq * 1.9} {
				if freq > float64(p.in)/2*0.95 {
					continue // not representable at the input rate
				}
				t.Run(fmt.Sprintf("%d-%d/%s/%.0fHz", p.in, p.out, q, freq), func(t *testing.T) {
					const amp = 0.5
					in := sine(p.in/2, p.in, freq, amp)
					out := resampleAll(t, in, p.in, p.out, 1, q)
					mid := interior(out, p.out/20)
					alias := math.Abs(float64(p.out)*math.Round(freq/float64(p.out)) - freq)
					g := goertzel(mid, alias, p.out)
					if db := DBFS(g / amp); db > -60 {
						t.Errorf("alias at %.0f Hz is at %.1f dB, want below -60 dB", alias, db)
					}
					// Everything left in the output is leakage: it must be under the
					// quality's promised attenuation (a little margin for the estimate).
					if db := DBFS(RMS(mid) / (amp / math.Sqrt2)); db > -(spec.attenuation - 3) {
						t.Errorf("output level %.1f dB relative to the input, want below -%.0f dB", db, spec.attenuation-3)
					}
				})
			}
		}
	}
}

func TestResampleSuppressesImages(t *testing.T) {
	// Upsampling: the images of a tone near the old Nyquist frequency must not appear.
	for _, p := range ratePairs {
		if p.out <= p.in {
			continue
		}
		t.Run(fmt.Sprintf("%d-%d", p.in, p.out), func(t *testing.T) {
			const amp = 0.5
			freq := 0.85 * float64(p.in) / 2
			in := sine(p.in/2, p.in, freq, amp)
			out := resampleAll(t, in, p.in, p.out, 1, QualityDefault)
			mid := interior(out, p.out/20)
			image := float64(p.in) - freq
			if db := DBFS(goertzel(mid, image, p.out) / amp); db > -80 {
				t.Errorf("image at %.0f Hz is at %.1f dB, want below -80 dB", image, db)
			}
		})
	}
}

func TestResampleLength(t *testing.T) {
	for _, p := range ratePairs {
		r, err := NewResampler(p.in, p.out, 2, QualityDefault)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 2, 3, 7, 100, 441, 1000, 16001, 44100} {
			in := make([]float32, 2*n) // Flush below resets r for the next length
			out := append(r.Process(in), r.Flush()...)
			ideal := float64(n) * float64(p.out) / float64(p.in)
			if got := len(out) / 2; math.Abs(float64(got)-math.Round(ideal)) > 1 {
				t.Errorf("%d→%d: %d frames in, %d out, want round(%.2f) ± 1", p.in, p.out, n, got, ideal)
			}
			if want := int(math.Ceil(ideal - 1e-9)); len(out)/2 != want {
				t.Errorf("%d→%d: %d frames in, %d out, want exactly ceil(%.2f) = %d", p.in, p.out, n, len(out)/2, ideal, want)
			}
		}
	}
}

// TestResampleChunked feeds the same stereo stream whole and in random pieces (some
// ending inside a frame) and requires identical output.
func TestResampleChunked(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, p := range ratePairs {
		t.Run(fmt.Sprintf("%d-%d", p.in, p.out), func(t *testing.T) {
			in := make([]float32, 2*(p.in/4))
			for i := range in {
				in[i] = float32(rng.NormFloat64() * 0.2)
			}
			whole := resampleAll(t, in, p.in, p.out, 2, QualityDefault)
			r, err := NewResampler(p.in, p.out, 2, QualityDefault)
			if err != nil {
				t.Fatal(err)
			}
			for round := 0; round < 2; round++ { // the second round checks Flush's reset
				var got []float32
				for rest := in; len(rest) > 0; {
					n := min(len(rest), rng.IntN(700))
					got = append(got, r.Process(rest[:n])...)
					rest = rest[n:]
				}
				got = append(got, r.Flush()...)
				if len(got) != len(whole) {
					t.Fatalf("round %d: chunked gave %d samples, whole %d", round, len(got), len(whole))
				}
				for i := range got {
					if got[i] != whole[i] {
						t.Fatalf("round %d: sample %d = %v chunked, %v whole", round, i, got[i], whole[i])
					}
				}
			}
		})
	}
}

// TestResampleImpulseTiming checks the delay compensation: a click at input sample k
// peaks at output sample k·out/in.
func TestResampleImpulseTiming(t *testing.T) {
	for _, p := range ratePairs {
		t.Run(fmt.Sprintf("%d-%d", p.in, p.out), func(t *testing.T) {
			r, err := NewResampler(p.in, p.out, 1, QualityDefault)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []int{0, 1, 997, 1000, 1003, 2500} {
				in := make([]float32, 4000)
				in[k] = 1
				out := append(r.Process(in), r.Flush()...)
				peak, at := float32(0), -1
				for i, v := range out {
					if v > peak {
						peak, at = v, i
					}
				}
				want := float64(k) * float64(p.out) / float64(p.in)
				if math.Abs(float64(at)-want) > 1 {
					t.Errorf("click at input %d peaks at output %d, want %.2f ± 1", k, at, want)
				}
			}
		})
	}
}

func TestResampleDCAndChannels(t *testing.T) {
	for _, p := range ratePairs {
		t.Run(fmt.Sprintf("%d-%d", p.in, p.out), func(t *testing.T) {
			n := p.in / 4
			in := make([]float32, 3*n)
			tone := sine(n, p.in, 300, 0.5)
			for i := 0; i < n; i++ {
				in[3*i] = 0.25      // DC
				in[3*i+1] = 0       // silence stays silence
				in[3*i+2] = tone[i] // an independent signal
			}
			out := resampleAll(t, in, p.in, p.out, 3, QualityDefault)
			frames := len(out) / 3
			edge := p.out / 20
			for j := edge; j < frames-edge; j++ {
				if d := math.Abs(float64(out[3*j]) - 0.25); d > 1e-4 {
					t.Fatalf("DC channel at frame %d = %v, want 0.25", j, out[3*j])
				}
				if out[3*j+1] != 0 {
					t.Fatalf("silent channel at frame %d = %v", j, out[3*j+1])
				}
			}
		})
	}
}

func TestResamplerDelay(t *testing.T) {
	r, err := NewResampler(44100, 16000, 1, QualityDefault)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, 44100)
	got := len(r.Process(in))
	ideal := 16000
	if held := ideal - got; held < 0 || held > r.Delay()+1 {
		t.Errorf("Process held back %d samples, Delay says %d", held, r.Delay())
	}
	if r.Latency() <= 0 || r.Latency() > 20e6 {
		t.Errorf("latency %v", r.Latency())
	}
	t.Logf("44100→16000: %d taps, delay %d output samples (%v)", r.Taps(), r.Delay(), r.Latency())
}

func TestNewResamplerRejects(t *testing.T) {
	tests := []struct {
		in, out, ch int
		q           Quality
	}{
		{0, 16000, 1, QualityDefault},
		{16000, 0, 1, QualityDefault},
		{16000, 16000, 0, QualityDefault},
		{-44100, 16000, 1, QualityDefault},
		{16000 * 300, 16000, 1, QualityDefault},
		{44100, 16000, 1, Quality(42)},
	}
	for _, tc := range tests {
		if _, err := NewResampler(tc.in, tc.out, tc.ch, tc.q); err == nil {
			t.Errorf("NewResampler(%d, %d, %d, %v) accepted", tc.in, tc.out, tc.ch, tc.q)
		}
	}
}

func TestResampleFrameAndPipeline(t *testing.T) {
	n := 4410
	stereo := Frame{Rate: 44100, Channels: 2, Start: 44100, Samples: make([]float32, 2*n)}
	tone := sine(n, 44100, 1000, 0.5)
	for i := 0; i < n; i++ {
		stereo.Samples[2*i] = tone[i]
		stereo.Samples[2*i+1] = tone[i] * 0.5
	}
	mono := Downmix(stereo)
	if mono.Channels != 1 || mono.Len() != n || mono.Start != stereo.Start {
		t.Fatalf("Downmix gave %s", mono.Summary())
	}
	if mono.Samples[100] != tone[100]*0.75 {
		t.Fatalf("Downmix sample = %v, want the channel average %v", mono.Samples[100], tone[100]*0.75)
	}
	p, err := ToPipeline(stereo)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rate != PipelineRate || p.Channels != 1 || p.Start != 16000 || p.Len() != 1600 {
		t.Fatalf("ToPipeline gave %s", p.Summary())
	}
	if a := goertzel(interior(p.Samples, 200), 1000, PipelineRate); math.Abs(a-0.375) > 1e-3 {
		t.Fatalf("1 kHz amplitude after ToPipeline = %v, want 0.375", a)
	}
	same, err := ResampleFrame(p, PipelineRate)
	if err != nil || same.Len() != p.Len() || same.Samples[5] != p.Samples[5] {
		t.Fatalf("resampling to the same rate changed the frame: %v", err)
	}
	if _, err := ResampleFrame(Frame{Rate: 16000, Channels: 2, Samples: []float32{1}}, 8000); err == nil {
		t.Fatal("accepted a partial frame")
	}
	if _, err := ToPipeline(Frame{}); err == nil {
		t.Fatal("accepted an empty format")
	}
}

// BenchmarkResample44100To16000 converts one second of 44.1 kHz mono noise per
// iteration, in 20 ms pieces as a live source would; rtf is processing time per second
// of audio.
func BenchmarkResample44100To16000(b *testing.B) {
	benchmarkResample(b, 44100, 16000, 1, QualityDefault)
}

func BenchmarkResample48000To16000Stereo(b *testing.B) {
	benchmarkResample(b, 48000, 16000, 2, QualityDefault)
}

func BenchmarkResample16000To44100(b *testing.B) {
	benchmarkResample(b, 16000, 44100, 1, QualityDefault)
}

func BenchmarkResample44100To16000High(b *testing.B) {
	benchmarkResample(b, 44100, 16000, 1, QualityHigh)
}

func benchmarkResample(b *testing.B, inRate, outRate, channels int, q Quality) {
	rng := rand.New(rand.NewPCG(9, 10))
	in := make([]float32, inRate*channels)
	for i := range in {
		in[i] = float32(rng.NormFloat64() * 0.1)
	}
	r, err := NewResampler(inRate, outRate, channels, q)
	if err != nil {
		b.Fatal(err)
	}
	chunk := inRate / 50 * channels
	b.SetBytes(int64(len(in) * 4))
	b.ResetTimer()
	for b.Loop() {
		for rest := in; len(rest) > 0; {
			n := min(len(rest), chunk)
			r.Process(rest[:n])
			rest = rest[n:]
		}
	}
	rtf := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(rtf, "rtf")
	b.ReportMetric(1/rtf, "x-realtime")
}
