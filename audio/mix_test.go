package audio

import (
	"math"
	"testing"
)

func TestMix(t *testing.T) {
	tests := []struct {
		name   string
		dst    []float32
		src    []float32
		offset int
		gain   float32
		want   []float32
	}{
		{"inside", []float32{1, 1, 1, 1}, []float32{1, 2}, 1, 1, []float32{1, 2, 3, 1}},
		{"gain", []float32{0, 0, 0}, []float32{1, 2, 3}, 0, 0.5, []float32{0.5, 1, 1.5}},
		{"runs past the end", []float32{0, 0, 0}, []float32{1, 2, 3}, 2, 1, []float32{0, 0, 1}},
		{"starts before", []float32{0, 0, 0}, []float32{1, 2, 3}, -1, 1, []float32{2, 3, 0}},
		{"entirely before", []float32{0, 0}, []float32{1, 2}, -5, 1, []float32{0, 0}},
		{"entirely after", []float32{0, 0}, []float32{1, 2}, 2, 1, []float32{0, 0}},
		{"empty source", []float32{0}, nil, 0, 1, []float32{0}},
		{"negative gain", []float32{1, 1}, []float32{1, 1}, 0, -1, []float32{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Mix(tc.dst, tc.src, tc.offset, tc.gain)
			assertSamples(t, tc.dst, tc.want, 0)
		})
	}
}

func TestMixFrames(t *testing.T) {
	a := Frame{Rate: 16000, Channels: 2, Start: 10, Samples: []float32{1, 1, 1, 1}}
	b := Frame{Rate: 16000, Channels: 2, Start: 11, Samples: []float32{0.5, -0.5, 0.5, -0.5}}
	c := Frame{Rate: 16000, Channels: 2, Start: 14, Samples: []float32{0.25, 0.25}}
	got, err := MixFrames(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Start != 10 || got.End() != 15 || got.Channels != 2 {
		t.Fatalf("mix is %s, want @10 +5 x2", got.Summary())
	}
	assertSamples(t, got.Samples, []float32{1, 1, 1.5, 0.5, 0.5, -0.5, 0, 0, 0.25, 0.25}, 0)

	bad := []struct {
		name   string
		frames []Frame
	}{
		{"none", nil},
		{"rates differ", []Frame{a, {Rate: 8000, Channels: 2}}},
		{"channels differ", []Frame{a, {Rate: 16000, Channels: 1}}},
		{"partial frame", []Frame{a, {Rate: 16000, Channels: 2, Samples: []float32{1}}}},
		{"no format", []Frame{{}}},
	}
	for _, tc := range bad {
		if _, err := MixFrames(tc.frames...); err == nil {
			t.Errorf("%s: MixFrames accepted it", tc.name)
		}
	}
}

func TestLevels(t *testing.T) {
	s := sine(16000, 16000, 1000, 1)
	if rms := RMS(s); math.Abs(rms-1/math.Sqrt2) > 1e-4 {
		t.Errorf("RMS of a full-scale sine = %v", rms)
	}
	if db := DBFS(RMS(s)); math.Abs(db+3.0103) > 1e-3 {
		t.Errorf("full-scale sine at %.4f dBFS RMS, want -3.01", db)
	}
	if !math.IsInf(DBFS(RMS(make([]float32, 10))), -1) || RMS(nil) != 0 {
		t.Error("silence should be -Inf dBFS")
	}
	if g := GainFromDB(-6.0206); math.Abs(float64(g)-0.5) > 1e-4 {
		t.Errorf("GainFromDB(-6.02) = %v", g)
	}
	if p := Peak([]float32{0.1, -0.7, 0.3}); p != 0.7 {
		t.Errorf("Peak = %v", p)
	}

	loud := []float32{0.5, 2, -1.5, 0.9}
	if n := Clip(loud); n != 2 {
		t.Errorf("Clip changed %d samples, want 2", n)
	}
	assertSamples(t, loud, []float32{0.5, 1, -1, 0.9}, 0)

	over := []float32{0.5, 2, -1}
	if g := LimitPeak(over, 1); g != 0.5 {
		t.Errorf("LimitPeak gain = %v, want 0.5", g)
	}
	assertSamples(t, over, []float32{0.25, 1, -0.5}, 0)
	if g := LimitPeak([]float32{0.1}, 1); g != 1 {
		t.Errorf("LimitPeak of a quiet buffer = %v", g)
	}
	x := []float32{1, -2}
	ApplyGain(x, 0.5)
	assertSamples(t, x, []float32{0.5, -1}, 0)
}
