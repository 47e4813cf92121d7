package voices

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parley-voice/parley/audio"
)

func TestSynthIsDeterministicAndBounded(t *testing.T) {
	for name, mk := range map[string]func() []float32{
		"hum":   func() []float32 { return Hum(MmHmm, 120, 0.4) },
		"cough": func() []float32 { return Cough(7, 0.5) },
		"knock": func() []float32 { return Knock(7, 3, 0.5) },
		"noise": func() []float32 { return Noise(7, 0.2, 0.5) },
	} {
		a, b := mk(), mk()
		if !slices.Equal(a, b) {
			t.Errorf("%s: two calls differ", name)
		}
		if p := audio.Peak(a); p < 0.39 || p > 0.51 {
			t.Errorf("%s: peak %g", name, p)
		}
		if len(a) < Rate/10 {
			t.Errorf("%s: %d samples", name, len(a))
		}
	}
	if slices.Equal(Cough(1, 0.5), Cough(2, 0.5)) {
		t.Error("coughs of different seeds are equal")
	}
}

func TestBounds(t *testing.T) {
	s := make([]float32, Rate)
	copy(s[4000:], Hum(Hmm, 150, 0.5))
	start, end := Bounds(s)
	if start < 3800 || start > 4200 || end < 4000+Rate*4/10 || end > 4000+Rate/2+200 {
		t.Errorf("bounds %d–%d of a hum at 4000–%d", start, end, 4000+len(Hum(Hmm, 150, 0.5)))
	}
	if a, b := Bounds(make([]float32, 100)); a != 0 || b != 0 {
		t.Errorf("silence has bounds %d–%d", a, b)
	}
}

func TestCacheSound(t *testing.T) {
	t.Setenv("PARLEY_VOICE_CACHE", t.TempDir())
	c := NewCache(t)
	made := 0
	mk := func() []float32 { made++; return Noise(1, 0.1, 0.5) }
	p1 := c.Sound(t, "noise", mk)
	p2 := c.Sound(t, "noise", mk)
	if p1 != p2 || made != 1 {
		t.Errorf("the cache made the sound %d times (%s, %s)", made, p1, p2)
	}
	if filepath.Dir(p1) != os.Getenv("PARLEY_VOICE_CACHE") {
		t.Errorf("sound cached at %s", p1)
	}
	if got := Load(t, p1); len(got) != len(Noise(1, 0.1, 0.5)) {
		t.Errorf("loaded %d samples", len(got))
	}
	if c.path("say", "flite", "slt", "yeah") == c.path("say", "flite", "rms", "yeah") {
		t.Error("two voices share a cache key")
	}
}
