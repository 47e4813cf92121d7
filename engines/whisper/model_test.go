package whisper

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/shapemodels"
	"github.com/parley-voice/parley/internal/testenv"
)

func openTestModel(t testing.TB) *Model {
	t.Helper()
	loadBackends(t)
	m, err := LoadModel(testenv.SharedFile(t, "models/ggml-tiny.en-for-tests.bin"), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestDecodeTestModel runs the whole decode path with whisper.cpp's weightless test
// model, which transcribes everything as empty text.
func TestDecodeTestModel(t *testing.T) {
	m := openTestModel(t)
	if m.Type() != "tiny" || m.Multilingual() {
		t.Errorf("model type %q multilingual %v; the test model is tiny.en", m.Type(), m.Multilingual())
	}
	d, err := m.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	samples := speechFiles(t)["jfk.wav"]
	if samples == nil {
		testenv.Missing(t, "jfk.wav", "the shared/audio folder should hold it")
	}
	for _, p := range []DecodeParams{
		{Threads: 2, SingleSegment: true, TokenTimestamps: true, NoFallback: true},
		{Threads: 2, InitialPrompt: "Kennedy", BeamSize: 2},
	} {
		segs, err := d.Decode(context.Background(), samples[:3*SampleRate], p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if w := Words(segs); len(w) != 0 {
			t.Fatalf("the weightless model produced words %v", w)
		}
	}
	if segs, err := d.Decode(context.Background(), nil, DecodeParams{}); err != nil || segs != nil {
		t.Fatalf("empty audio: %v, %v", segs, err)
	}
}

func TestDecodeCancel(t *testing.T) {
	m := openTestModel(t)
	d, err := m.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	samples := make([]float32, 5*SampleRate)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Decode(ctx, samples, DecodeParams{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("decode with a cancelled context: %v", err)
	}
	// Cancelled while running: the abort callback stops the computation.
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := d.Decode(ctx, samples, DecodeParams{Threads: 1}); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("decode past its deadline: %v", err)
	}
	// The decoder still works afterwards.
	if _, err := d.Decode(context.Background(), samples, DecodeParams{Threads: 2}); err != nil {
		t.Fatalf("decode after an aborted one: %v", err)
	}
}

func TestModelErrors(t *testing.T) {
	loadBackends(t)
	if _, err := LoadModel(filepath.Join(t.TempDir(), "missing.bin"), ModelParams{}); !errors.Is(err, ErrLoad) {
		t.Fatalf("missing model: %v", err)
	}
	m := openTestModel(t)
	d, err := m.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d.Close()
	if _, err := d.Decode(context.Background(), make([]float32, 100), DecodeParams{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("decode after Close: %v", err)
	}
}

func TestWords(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	segs := []Segment{
		{Tokens: []Token{
			{Text: "[_BEG_]", Special: true},
			{Text: " And", Start: ms(0), End: ms(200), P: 0.9},
			{Text: " so", Start: ms(200), End: ms(400), P: 0.7},
			{Text: " Amer", Start: ms(400), End: ms(600), P: 0.8},
			{Text: "icans", Start: ms(600), End: ms(900), P: 0.6},
			{Text: ",", Start: ms(900), End: ms(950), P: 0.5},
			{Text: "[_TT_50]", Special: true},
		}},
		{Tokens: []Token{
			{Text: "ask", Start: ms(1000), End: ms(1200), P: 1}, // a segment boundary starts a word
			{Text: " ", P: 1}, // a lone space is no word
		}},
	}
	got := Words(segs)
	want := []Word{
		{Text: "And", Start: 0, End: ms(200), P: 0.9},
		{Text: "so", Start: ms(200), End: ms(400), P: 0.7},
		{Text: "Americans,", Start: ms(400), End: ms(950), P: (0.8 + 0.6 + 0.5) / 3},
		{Text: "ask", Start: ms(1000), End: ms(1200), P: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("words %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Text != w.Text || g.Start != w.Start || g.End != w.End || g.P-w.P > 1e-6 || w.P-g.P > 1e-6 {
			t.Fatalf("word %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestKnownLanguage: whisper's language codes are known; an unknown code, "auto" and a
// NUL byte are not.
func TestKnownLanguage(t *testing.T) {
	for code, want := range map[string]bool{"en": true, "de": true, "fr": true, "xx": false, "auto": false, "": false, "e\x00n": false, "english": true} {
		if got := KnownLanguage(code); got != want {
			t.Errorf("KnownLanguage(%q) = %v, want %v", code, got, want)
		}
	}
}

// TestDecodeTextTokens: a decode asked for a number of text tokens produces exactly that
// many, and nothing special, with a model of tiny.en's shape and random weights, which on
// its own produces nonsense of any length: what the realistic bench relies on to give
// such a model the decoding cost of a real transcript.
func TestDecodeTextTokens(t *testing.T) {
	loadBackends(t)
	path, err := shapemodels.Ensure(context.Background(), shapemodels.WhisperTinyEn)
	if err != nil {
		testenv.Missing(t, "the whisper tiny.en shape ("+err.Error()+")", "scripts/shape-models builds it")
	}
	m, err := LoadModel(path, ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := m.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	samples := speechFiles(t)["jfk.wav"]
	if samples == nil {
		testenv.Missing(t, "jfk.wav", "the shared/audio folder should hold it")
	}
	for _, p := range []DecodeParams{
		{Threads: 2, SingleSegment: true, TokenTimestamps: true, NoFallback: true, ForceTextTokens: true, TextTokens: 7, AudioContext: AudioContextFor(2 * SampleRate)},
		{Threads: 2, SingleSegment: true, BeamSize: 2, ForceTextTokens: true, TextTokens: 3},
		{Threads: 2, SingleSegment: true, ForceTextTokens: true},
	} {
		segs, err := d.Decode(context.Background(), samples[:2*SampleRate], p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		text := 0
		for _, s := range segs {
			for _, tok := range s.Tokens {
				if !tok.Special {
					text++
				}
			}
		}
		if text != p.TextTokens {
			t.Errorf("%+v: %d text tokens in %+v, want %d", p, text, segs, p.TextTokens)
		}
	}
}

// TestTokenCount: the vocabulary spells common words with one token each, and longer
// text with more.
func TestTokenCount(t *testing.T) {
	m := openTestModel(t)
	for text, want := range map[string]int{"": 0, " hello": 1, " what time is it": 4} {
		n, err := m.TokenCount(text)
		if err != nil || n != want {
			t.Errorf("TokenCount(%q) = %d, %v; want %d", text, n, err, want)
		}
	}
}
