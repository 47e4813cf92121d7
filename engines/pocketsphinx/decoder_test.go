package pocketsphinx

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
)

func newDecoder(t testing.TB, cfg Config) *Decoder {
	t.Helper()
	hmm, _, _ := DefaultModel()
	if _, err := os.Stat(filepath.Join(hmm, "mdef")); err != nil {
		testenv.Missing(t, "the pocketsphinx en-us model", "install pocketsphinx-en-us; "+testenv.EnvFix)
	}
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func goForward(t testing.TB) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(testenv.SharedFile(t, "audio/goforward.wav"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Rate != 16000 || f.Channels != 1 {
		t.Fatalf("goforward.wav is %s", f.Summary())
	}
	return f.Samples
}

func TestDecodeWholeUtterance(t *testing.T) {
	d := newDecoder(t, Config{})
	samples := goForward(t)
	if err := d.StartUtt(); err != nil {
		t.Fatal(err)
	}
	if err := d.Process(FloatToPCM16(nil, samples), true); err != nil {
		t.Fatal(err)
	}
	if err := d.EndUtt(); err != nil {
		t.Fatal(err)
	}
	// What `pocketsphinx single goforward.wav` prints with the same model.
	if got := d.Hyp(); got != "go forward ten meters" {
		t.Fatalf("hypothesis %q", got)
	}
	var words []string
	var last Word
	for _, w := range d.Words() {
		if w.End <= w.Start || w.Start < last.End {
			t.Errorf("word %+v after %+v: times out of order", w, last)
		}
		last = w
		if w.Filler {
			continue
		}
		if w.Prob <= 0 || w.Prob > 1 {
			t.Errorf("word %+v: probability out of range", w)
		}
		words = append(words, w.Text)
	}
	if !slices.Equal(words, []string{"go", "forward", "ten", "meters"}) {
		t.Fatalf("words %q", words)
	}
}

func TestDecodeStreaming(t *testing.T) {
	d := newDecoder(t, Config{})
	samples := goForward(t)
	for round := 0; round < 2; round++ { // a second utterance starts from a clean state
		if err := d.StartUtt(); err != nil {
			t.Fatal(err)
		}
		var partials []string
		for i := 0; i < len(samples); i += 1600 {
			if err := d.ProcessFloat(samples[i:min(i+1600, len(samples))]); err != nil {
				t.Fatal(err)
			}
			partials = append(partials, d.Hyp())
		}
		if err := d.EndUtt(); err != nil {
			t.Fatal(err)
		}
		final := d.Hyp()
		if !strings.HasPrefix(final, "go forward ten") {
			t.Fatalf("round %d: final %q (partials %q)", round, final, partials)
		}
		if partials[0] != "" || !slices.ContainsFunc(partials, func(p string) bool { return strings.HasPrefix(p, "go") }) {
			t.Fatalf("round %d: partials %q do not grow from nothing", round, partials)
		}
	}
}

func TestDecoderErrors(t *testing.T) {
	d := newDecoder(t, Config{})
	if err := d.Process([]int16{1, 2, 3}, false); err == nil {
		t.Fatal("Process outside an utterance succeeded")
	}
	if err := d.EndUtt(); err != nil {
		t.Fatal("EndUtt without an utterance:", err)
	}
	d.Close()
	d.Close()
	if err := d.StartUtt(); err == nil {
		t.Fatal("StartUtt after Close succeeded")
	}
	if d.Hyp() != "" || d.Words() != nil {
		t.Fatal("results after Close")
	}
	if _, err := NewDecoder(Config{HMM: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("NewDecoder with a missing acoustic model succeeded")
	}
	if _, err := NewDecoder(Config{Options: map[string]any{"no_such_option": 1}}); err == nil {
		t.Fatal("NewDecoder with an unknown option succeeded")
	}
}

func TestFloatToPCM16(t *testing.T) {
	in := []float32{0, 0.5, -0.5, 1, -1, 2, -2, float32(math.NaN()), 1.0 / 32768, 0.4 / 32768, float32(math.Inf(1))}
	want := []int16{0, 16384, -16384, 32767, -32768, 32767, -32768, 0, 1, 0, 32767}
	if got := FloatToPCM16(nil, in); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// 16-bit samples decoded as WAV readers do (x/32768) convert back exactly.
	for _, v := range []int16{-32768, -12345, -1, 0, 1, 12345, 32767} {
		if got := FloatToPCM16(nil, []float32{float32(v) / 32768}); got[0] != v {
			t.Fatalf("%d round-tripped to %d", v, got[0])
		}
	}
}

func TestTrimAltAndFillers(t *testing.T) {
	for in, want := range map[string]string{"read(2)": "read", "read": "read", "(x)": "(x)", "a(b": "a(b"} {
		if got := trimAlt(in); got != want {
			t.Errorf("trimAlt(%q) = %q, want %q", in, got, want)
		}
	}
	for w, filler := range map[string]bool{"<s>": true, "</s>": true, "<sil>": true, "[NOISE]": true, "++UH++": true, "go": false} {
		if isFiller(w) != filler {
			t.Errorf("isFiller(%q) = %v", w, !filler)
		}
	}
}

// TestAlign aligns goforward.wav to its words: every word in order, each after the one
// before, within the recording; and a word the dictionary lacks is refused.
func TestAlign(t *testing.T) {
	d := newDecoder(t, Config{})
	samples := goForward(t)
	if err := d.SetAlignText("mycroftish go forward"); err == nil {
		t.Error("aligning to a word the dictionary lacks: no error")
	}
	if err := d.SetAlignText("go forward ten meters"); err != nil {
		t.Fatal(err)
	}
	if err := d.StartUtt(); err != nil {
		t.Fatal(err)
	}
	if err := d.Process(FloatToPCM16(nil, samples), true); err != nil {
		t.Fatal(err)
	}
	if err := d.EndUtt(); err != nil {
		t.Fatal(err)
	}
	var words []string
	var last Word
	length := audio.SamplesToDuration(int64(len(samples)), 16000)
	for _, w := range d.Words() {
		if w.Filler {
			continue
		}
		if w.End <= w.Start || w.Start < last.End || w.End > length+10*time.Millisecond {
			t.Errorf("word %+v after %+v in %v of audio", w, last, length)
		}
		words = append(words, w.Text)
		last = w
	}
	if got := strings.Join(words, " "); got != "go forward ten meters" {
		t.Fatalf("aligned words %q", got)
	}
}
