package room

import (
	"errors"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func laptop() Config {
	return Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Seed: 1}
}

func whiteSignal(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(0.1 * rng.NormFloat64())
	}
	return x
}

func power(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e / float64(len(x))
}

func db(x float64) float64 { return 10 * math.Log10(x) }

func mustNew(t testing.TB, c Config) *Path {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"laptop", func(*Config) {}, true},
		{"zero", func(c *Config) { *c = Config{} }, true},
		{"negative delay", func(c *Config) { c.Delay = -time.Millisecond }, false},
		{"huge delay", func(c *Config) { c.Delay = time.Minute }, false},
		{"positive gain", func(c *Config) { c.GainDB = 3 }, false},
		{"NaN gain", func(c *Config) { c.GainDB = math.NaN() }, false},
		{"-Inf gain", func(c *Config) { c.GainDB = math.Inf(-1) }, false},
		{"negative rt60", func(c *Config) { c.RT60 = -time.Second }, false},
		{"huge rt60", func(c *Config) { c.RT60 = time.Hour }, false},
		{"noise", func(c *Config) { c.NoiseDB = -60 }, true},
		{"positive noise", func(c *Config) { c.NoiseDB = 1 }, false},
		{"NaN noise", func(c *Config) { c.NoiseDB = math.NaN() }, false},
		{"bad color", func(c *Config) { c.Noise = 7 }, false},
		{"negative rate", func(c *Config) { c.Rate = -1 }, false},
		{"48 kHz", func(c *Config) { c.Rate = 48000 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := laptop()
			tt.edit(&c)
			_, err := New(c)
			if (err == nil) != tt.ok {
				t.Fatalf("New(%+v) = %v, want ok=%v", c, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
		})
	}
}

// TestImpulseResponse: an impulse comes out as the documented response: nothing before
// the delay, the direct path at the delay, energy gain GainDB, reverberant energy at
// the documented direct-to-reverberant ratio, and a decay of 60 dB over RT60.
func TestImpulseResponse(t *testing.T) {
	for _, rt60 := range []time.Duration{0, 150 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		t.Run(rt60.String(), func(t *testing.T) {
			c := laptop()
			c.RT60 = rt60
			p := mustNew(t, c)
			delay := 480
			in := make([]float32, delay+int(rt60.Seconds()*16000)+1000)
			in[0] = 1
			h := p.Process(in)
			if !slices.Equal(h[:len(p.ImpulseResponse())], p.ImpulseResponse()) {
				t.Fatal("output of an impulse differs from ImpulseResponse")
			}
			for i := range delay {
				if h[i] != 0 {
					t.Fatalf("echo at sample %d, before the delay of %d", i, delay)
				}
			}
			if h[delay] <= 0 {
				t.Fatalf("direct path %g at the delay, want > 0", h[delay])
			}
			var total float64
			for _, v := range h {
				total += float64(v) * float64(v)
			}
			if g := db(total); math.Abs(g-c.GainDB) > 0.01 {
				t.Fatalf("energy gain %.3f dB, want %g", g, c.GainDB)
			}
			direct := float64(h[delay]) * float64(h[delay])
			if rt60 == 0 {
				if direct != total {
					t.Fatal("energy outside the direct path without reverberation")
				}
				return
			}
			if drr, want := db(direct/(total-direct)), DirectToReverbDB(rt60); math.Abs(drr-want) > 0.01 {
				t.Fatalf("direct-to-reverberant ratio %.2f dB, want %.2f", drr, want)
			}
			// Schroeder backward integration of the tail: the decay from −5 to −25 dB,
			// extrapolated to 60 dB, is the RT60.
			tail := h[delay+1:]
			edc := make([]float64, len(tail))
			var acc float64
			for i := len(tail) - 1; i >= 0; i-- {
				acc += float64(tail[i]) * float64(tail[i])
				edc[i] = acc
			}
			at := func(level float64) float64 {
				for i, e := range edc {
					if db(e/edc[0]) <= level {
						return float64(i) / 16000
					}
				}
				return math.NaN()
			}
			got := 3 * (at(-25) - at(-5))
			if math.Abs(got-rt60.Seconds()) > 0.1*rt60.Seconds() {
				t.Fatalf("measured RT60 %.3f s, want %v ±10%%", got, rt60)
			}
		})
	}
}

// TestStreaming: any block split gives exactly the output of one block.
func TestStreaming(t *testing.T) {
	c := laptop()
	c.NoiseDB = -50
	x := whiteSignal(3*16000, 2)
	whole := mustNew(t, c).Process(x)
	p := mustNew(t, c)
	rng := rand.New(rand.NewPCG(3, 3))
	var got []float32
	for rest := x; len(rest) > 0; {
		n := min(len(rest), rng.IntN(700))
		got = append(got, p.Process(rest[:n])...)
		rest = rest[n:]
	}
	if !slices.Equal(got, whole) {
		t.Fatal("streamed output differs from whole-block output")
	}
}

func TestDeterministic(t *testing.T) {
	c := laptop()
	c.NoiseDB = -40
	x := whiteSignal(16000, 4)
	a, b := mustNew(t, c).Process(x), mustNew(t, c).Process(x)
	if !slices.Equal(a, b) {
		t.Fatal("equal configs gave different output")
	}
	c.Seed++
	if slices.Equal(a, mustNew(t, c).Process(x)) {
		t.Fatal("another seed gave the same output")
	}
}

// TestEchoLevel: white noise comes back GainDB quieter (the path's ERL is −GainDB).
func TestEchoLevel(t *testing.T) {
	for _, gain := range []float64{-6, -20} {
		c := laptop()
		c.GainDB = gain
		x := whiteSignal(5*16000, 5)
		y := mustNew(t, c).Process(x)
		skip := 16000 // let the delay line and tail fill
		if got := db(power(y[skip:]) / power(x[skip:])); math.Abs(got-gain) > 0.3 {
			t.Errorf("gain %g dB: echo %.2f dB relative to the played signal", gain, got)
		}
	}
}

// TestNoise: the noise floor has the configured RMS, and pink noise falls by about
// 3 dB per octave while white noise is flat.
func TestNoise(t *testing.T) {
	for _, color := range []NoiseColor{Pink, White} {
		t.Run(color.String(), func(t *testing.T) {
			c := Config{NoiseDB: -50, Noise: color, Seed: 9}
			y := mustNew(t, c).Process(make([]float32, 20*16000))
			if got := db(power(y)); math.Abs(got-c.NoiseDB) > 0.5 {
				t.Fatalf("noise floor %.2f dBFS, want %g", got, c.NoiseDB)
			}
			low, high := bandPower(y, 250, 500), bandPower(y, 2000, 4000)
			// Per-octave power: white doubles per octave (+9 dB over three), pink is flat.
			slope := db(high/low) / 3
			want := map[NoiseColor]float64{White: 3, Pink: 0}[color]
			if math.Abs(slope-want) > 1 {
				t.Fatalf("octave-band power changes by %.2f dB per octave, want %g", slope, want)
			}
		})
	}
}

// bandPower sums the averaged periodogram of x (16 kHz) between lo and hi Hz.
func bandPower(x []float32, lo, hi float64) float64 {
	const n = 1024
	var sum float64
	for start := 0; start+n <= len(x); start += n {
		buf := make([]complex128, n)
		for i := range n {
			buf[i] = complex(float64(x[start+i]), 0)
		}
		fft(buf)
		for k := range n / 2 {
			if f := float64(k) * 16000 / n; f >= lo && f < hi {
				a := cmplx.Abs(buf[k])
				sum += a * a
			}
		}
	}
	return sum
}

// fft is an in-place radix-2 transform (len(a) a power of two); tests only.
func fft(a []complex128) {
	n := len(a)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			a[i], a[j] = a[j], a[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		w := cmplx.Exp(complex(0, -2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			wk := complex(1, 0)
			for k := range size / 2 {
				u, v := a[start+k], a[start+k+size/2]*wk
				a[start+k], a[start+k+size/2] = u+v, u-v
				wk *= w
			}
		}
	}
}

func TestAddToLength(t *testing.T) {
	p := mustNew(t, laptop())
	if err := p.AddTo(make([]float32, 3), make([]float32, 4)); err == nil {
		t.Fatal("AddTo accepted buffers of different lengths")
	}
	mic := []float32{0.5, 0.5}
	if err := p.AddTo(mic, []float32{0, 0}); err != nil || mic[0] != 0.5 {
		t.Fatalf("AddTo of silence changed the microphone: %v %v", mic, err)
	}
}

func TestNoiseColorText(t *testing.T) {
	for in, want := range map[string]NoiseColor{"pink": Pink, "white": White, "": Pink} {
		var c NoiseColor
		if err := c.UnmarshalText([]byte(in)); err != nil || c != want {
			t.Errorf("%q: %v %v", in, c, err)
		}
	}
	var c NoiseColor
	if err := c.UnmarshalText([]byte("brown")); err == nil {
		t.Error("brown accepted")
	}
}

func FuzzNoiseColorText(f *testing.F) {
	for _, s := range []string{"pink", "white", "", "Pink", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var c NoiseColor
		if err := c.UnmarshalText([]byte(s)); err == nil && c.String() != s && s != "" {
			t.Fatalf("%q accepted as %v", s, c)
		}
	})
}

// BenchmarkPath: cost of one second of 16 kHz audio through the laptop path.
func BenchmarkPath(b *testing.B) {
	c := laptop()
	c.NoiseDB = -60
	p := mustNew(b, c)
	x := whiteSignal(16000, 6)
	out := make([]float32, 160)
	b.ResetTimer()
	for b.Loop() {
		for i := 0; i < len(x); i += 160 {
			clear(out)
			_ = p.AddTo(out, x[i:i+160])
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "rtf")
}
