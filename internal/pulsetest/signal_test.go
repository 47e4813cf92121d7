package pulsetest

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	needle := make([]float32, 4000)
	for i := range needle {
		needle[i] = float32(rng.NormFloat64() * 0.1)
	}
	tests := []struct {
		name   string
		offset int
		gain   float32
		noise  float64
	}{
		{"exact", 1234, 1, 0},
		{"scaled", 7, 0.25, 0},
		{"noisy", 20001, 0.5, 0.02},
		{"at the end", 26000, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hay := make([]float32, 30000)
			for i := range hay {
				hay[i] = float32(rng.NormFloat64() * tt.noise)
			}
			for i, v := range needle {
				hay[tt.offset+i] += v * tt.gain
			}
			off, corr := Find(hay, needle)
			if off != tt.offset || corr < 0.9 {
				t.Fatalf("Find = %d (corr %.3f), want %d", off, corr, tt.offset)
			}
		})
	}
}

func TestOnsets(t *testing.T) {
	x := make([]float32, 1000)
	for _, start := range []int{100, 400, 410, 800} {
		for i := start; i < start+5; i++ {
			x[i] = float32(math.Sin(float64(i)))
		}
	}
	got := Onsets(x, 0.05, 50)
	want := []int{100, 400, 800} // 410 follows 400 too closely
	if len(got) != len(want) {
		t.Fatalf("Onsets = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] < want[i] || got[i] > want[i]+2 {
			t.Fatalf("Onsets = %v, want %v", got, want)
		}
	}
}
