package voices

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
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
	room := Room(3, 2, 0.01)
	if len(room) != 2*Rate || !slices.Equal(room, Room(3, 2, 0.01)) {
		t.Errorf("room noise: %d samples, or not deterministic", len(room))
	}
	if r := audio.RMS(room); r < 0.0099 || r > 0.0101 {
		t.Errorf("room noise RMS %g, want 0.01", r)
	}
	// Steady: every half second within a few dB of the whole.
	for i := Rate / 10; i+Rate/2 <= len(room)-Rate/10; i += Rate / 2 {
		if d := audio.DBFS(audio.RMS(room[i:i+Rate/2])) - audio.DBFS(0.01); d < -4 || d > 4 {
			t.Errorf("room noise at %d: %+.1f dB from its level", i, d)
		}
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
	// The file's bounds are the samples'.
	path := filepath.Join(t.TempDir(), "s.wav")
	if err := audio.WriteWAVFile(path, audio.Frame{Samples: s, Rate: Rate, Channels: 1}, 16); err != nil {
		t.Fatal(err)
	}
	fs, fe, err := audio.SoundBoundsFile(path)
	if err != nil || fs != audio.SamplesToDuration(int64(start), Rate) || fe != audio.SamplesToDuration(int64(end), Rate) {
		t.Errorf("file bounds %v–%v (%v), want %d–%d samples", fs, fe, err, start, end)
	}
}

func TestCacheSound(t *testing.T) {
	c, err := OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	mk := func() []float32 { made++; return Noise(1, 0.1, 0.5) }
	p1, err1 := c.Sound("noise", mk)
	p2, err2 := c.Sound("noise", mk)
	if err1 != nil || err2 != nil || p1 != p2 || made != 1 {
		t.Errorf("the cache made the sound %d times (%s, %s; %v, %v)", made, p1, p2, err1, err2)
	}
	if filepath.Dir(p1) != c.Dir() {
		t.Errorf("sound cached at %s", p1)
	}
	if got, err := Load(p1); err != nil || len(got) != len(Noise(1, 0.1, 0.5)) {
		t.Errorf("loaded %d samples (%v)", len(got), err)
	}
	if c.path("say", "flite", "slt", "yeah") == c.path("say", "flite", "rms", "yeah") {
		t.Error("two voices share a cache key")
	}
	p, err := c.Make(Sound{Kind: KindKnock, Seed: 3, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(p); !slices.Equal(got, quantised(Knock(3, 3, 0.6))) {
		t.Error("a knock's recipe did not make its knocks")
	}
}

// quantised is what a 16-bit WAV file keeps of samples.
func quantised(s []float32) []float32 {
	path := filepath.Join(os.TempDir(), "quantised-voices-test.wav")
	defer os.Remove(path)
	if err := audio.WriteWAVFile(path, audio.Frame{Samples: s, Rate: Rate, Channels: 1}, 16); err != nil {
		return nil
	}
	f, _ := audio.DecodeWAVFile(path)
	return f.Samples
}

func TestParseVoice(t *testing.T) {
	for in, want := range map[string]Voice{
		"flite:slt":                       {Engine: "flite", Name: "slt"},
		" espeak-ng:en-us+f3":             {Engine: "espeak-ng", Name: "en-us+f3"},
		"festival:cmu_us_slt_arctic_hts ": {Engine: "festival", Name: "cmu_us_slt_arctic_hts"},
	} {
		if got, err := ParseVoice(in); err != nil || got != want {
			t.Errorf("%q: %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "slt", "say:slt", "flite:", "flite:a b", "flite:$(x)", "espeak-ng:-w"} {
		if _, err := ParseVoice(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	for _, v := range []Voice{{"flite", "slt", 13, 0}, {"flite", "slt", 0, 0.2}, {"flite", "slt", 0, 3}} {
		if err := v.Validate(); err == nil {
			t.Errorf("%+v is valid", v)
		}
	}
	if s := (Voice{"flite", "slt", 2, 0.9}).String(); s != "flite:slt pitch +2 rate 0.9" {
		t.Errorf("String %q", s)
	}
}

func TestSoundValidate(t *testing.T) {
	good := []Sound{{Kind: KindHum}, {Kind: KindHum, Shape: "mhm", Pitch: 210}, {Kind: KindCough, Seed: 2},
		{Kind: KindKnock, Count: 3}, {Kind: KindNoise, Length: 300 * time.Millisecond}, {Kind: KindRoom, Length: 5 * time.Second, Level: 0.02}}
	for _, s := range good {
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
		if len(s.Samples()) == 0 {
			t.Errorf("%+v: no samples", s)
		}
	}
	bad := []Sound{{}, {Kind: "bang"}, {Kind: KindHum, Shape: "ahem"}, {Kind: KindHum, Pitch: 20}, {Kind: KindCough, Count: 2},
		{Kind: KindKnock, Count: 9}, {Kind: KindNoise, Length: time.Minute}, {Kind: KindRoom}, {Kind: KindCough, Level: 2}}
	for _, s := range bad {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v is valid", s)
		}
	}
	if a, b := (Sound{Kind: KindHum}).String(), (Sound{Kind: KindHum, Shape: "mm-hmm", Pitch: 120}).String(); a != b {
		t.Errorf("a recipe and its defaults key differently: %q, %q", a, b)
	}
}

// TestSay speaks in each engine, shifted and not: the same recipe gives the same file,
// and a shifted voice is longer when slower.
func TestSay(t *testing.T) {
	for _, p := range []string{"flite", "text2wave", "espeak-ng", "sox"} {
		testenv.Command(t, p, testenv.EnvFix)
	}
	c, err := OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, v := range []Voice{{"flite", "slt", 0, 0}, {"festival", "kal_diphone", 0, 0}, {"espeak-ng", "en-gb-scotland", 0, 0}} {
		plain, err := c.Say(ctx, v, "hold on a second")
		if err != nil {
			t.Fatal(err)
		}
		slow := v
		slow.Pitch, slow.Rate = -2, 0.8
		shifted, err := c.Say(ctx, slow, "hold on a second")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := Load(plain)
		b, _ := Load(shifted)
		as, ae := Bounds(a)
		bs, be := Bounds(b)
		if ratio := float64(be-bs) / float64(ae-as); ratio < 1.15 || ratio > 1.35 {
			t.Errorf("%s: at rate 0.8 the speech is %.2f times as long, want about 1.25", v, ratio)
		}
		again, err := c.Say(ctx, slow, "hold on a second")
		if err != nil || again != shifted {
			t.Errorf("%s: asked again: %s, %v", v, again, err)
		}
		os.Remove(shifted)
		remade, err := c.Say(ctx, slow, "hold on a second")
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := Load(remade); !slices.Equal(b, c) {
			t.Errorf("%s: made twice, the shifted voice differs", slow)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := c.Say(ctx, Voice{"espeak-ng", "en-gb", 0, 0}, "a word never said before"); err == nil || !strings.Contains(err.Error(), "scripts/env") {
		t.Errorf("without espeak-ng on the PATH: %v", err)
	}
	if _, err := exec.LookPath("flite"); err == nil {
		t.Error("PATH not cleared")
	}
}
