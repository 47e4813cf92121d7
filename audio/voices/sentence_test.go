package voices

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestSentenceIsCutBetweenWords speaks sentences in a flite and two espeak-ng voices
// (one shifted), aligns them and cuts them where a speaker would pause: the parts join
// into the sentence sample for sample, every cut lies in the quiet between two words,
// every part holds speech, a filler is stretched, and the cache keeps the alignment.
func TestSentenceIsCutBetweenWords(t *testing.T) {
	for _, p := range []string{"flite", "espeak-ng", "sox", "pocketsphinx"} {
		testenv.Command(t, p, testenv.EnvFix)
	}
	c, err := OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		marked string
		filler string
	}{
		{marked: "i need eggs, | milk, | and some bread"},
		{marked: "i would like, uh, | a cup of tea", filler: "uh"},
		{marked: "how far is the moon? | and how far is the sun?"},
	}
	for _, v := range []Voice{{"flite", "slt", 0, 0}, {"espeak-ng", "en-gb-scotland", 0, 0}, {"espeak-ng", "en-us+f3", 3, 0.9}} {
		for _, tc := range cases {
			text, parts, err := SplitSentence(tc.marked)
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Sentence(ctx, v, text)
			if err != nil {
				t.Fatalf("%s %q: %v", v, text, err)
			}
			var got []string
			for _, w := range s.Words {
				got = append(got, w.Text)
			}
			if !slices.Equal(got, Words(text)) {
				t.Fatalf("%s %q: aligned words %q", v, text, got)
			}
			var joined []float32
			for i, p := range parts {
				part := s.Part(p.From, p.To)
				joined = append(joined, part...)
				if on, off := Bounds(part); off-on < Rate/10 {
					t.Errorf("%s %q: part %d holds %d samples of speech", v, text, i+1, off-on)
				}
				if i == len(parts)-1 {
					continue
				}
				cut := s.Cut(p.To)
				if !s.quietAt(cut) {
					t.Errorf("%s %q: the cut after %q lies at %.0f dBFS, not in the quiet between words", v, text, s.Words[p.To-1].Text,
						audio.DBFS(audio.RMS(s.Samples[max(cut-cutWindow/2, 0):min(cut+cutWindow/2, len(s.Samples))])))
				}
				// Past the middle of the word before, and short of the middle of the word
				// after the next (a short word may be misaligned, Cut).
				before, limit := s.Words[p.To-1], len(s.Samples)
				if p.To+1 < len(s.Words) {
					limit = (s.Words[p.To+1].Start + s.Words[p.To+1].End) / 2
				}
				if cut < (before.Start+before.End)/2 || cut >= limit {
					t.Errorf("%s %q: cut at %d, after %q %d–%d, and before %d", v, text, cut, before.Text, before.Start, before.End, limit)
				}
			}
			if !slices.Equal(joined, s.Samples) {
				t.Errorf("%s %q: the parts (%d samples) do not join into the sentence (%d)", v, text, len(joined), len(s.Samples))
			}
			if tc.filler != "" {
				i := slices.Index(got, tc.filler)
				w := s.Words[i]
				if on, off := audio.SoundBounds(s.Samples[w.Start:w.End], Rate); float64(off-on) < 0.8*FillerLength {
					t.Errorf("%s %q: %q lasts %d ms", v, text, tc.filler, (off-on)*1000/Rate)
				}
			}
			// The part as a file is the part, and asking again reads the cache.
			path, err := c.SayWords(ctx, v, text, parts[0].From, parts[0].To)
			if err != nil {
				t.Fatal(err)
			}
			if f, err := Load(path); err != nil || !slices.Equal(f, s.Part(parts[0].From, parts[0].To)) {
				t.Errorf("%s %q: the part's file differs from the part (%v)", v, text, err)
			}
			again, err := c.Sentence(ctx, v, text)
			if err != nil || !slices.Equal(again.Words, s.Words) || !slices.Equal(again.Samples, s.Samples) {
				t.Errorf("%s %q: read from the cache: %v", v, text, err)
			}
		}
	}
	metas, _ := filepath.Glob(filepath.Join(c.Dir(), "sentence-*.json"))
	if len(metas) != 9 {
		t.Errorf("the cache holds %d alignments, want 9", len(metas))
	}
	// The alignment is read from the cache, not made again: without the aligner on the
	// PATH a cached sentence is still there, and a new one says what is missing.
	t.Setenv("PATH", t.TempDir())
	if _, err := c.Sentence(ctx, Voice{"flite", "slt", 0, 0}, "i need eggs, milk, and some bread"); err != nil {
		t.Errorf("a cached sentence without pocketsphinx: %v", err)
	}
	if _, err := c.Sentence(ctx, Voice{"flite", "slt", 0, 0}, "a sentence never said"); err == nil || !strings.Contains(err.Error(), "scripts/env") {
		t.Errorf("a new sentence without flite and pocketsphinx: %v", err)
	}
}

// TestCut cuts made-up sentences: in the silence between words when there is one (the
// stretch nearest the aligned boundary), else at the quietest point near it, at a zero
// crossing; never beyond the middle of a word.
func TestCut(t *testing.T) {
	tone := func(n int, level float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(level * math.Sin(2*math.Pi*200*float64(i)/Rate+0.3))
		}
		return out
	}
	ms := func(m int) int { return m * Rate / 1000 }
	// "one" 0–300 ms, silence to 400, "two" 400–550 (aligned as if 380–570), a dip to a
	// tenth at 550–560 ms, and "three" right after (aligned from 570).
	samples := slices.Concat(tone(ms(300), 0.5), make([]float32, ms(100)), tone(ms(150), 0.5), tone(ms(10), 0.05), tone(ms(300), 0.5))
	s := &Sentence{Samples: samples, Words: []Word{
		{"one", 0, ms(300)}, {"two", ms(380), ms(570)}, {"three", ms(570), len(samples)},
	}}
	if c := s.Cut(0); c != 0 {
		t.Errorf("cut 0 at %d", c)
	}
	if c := s.Cut(3); c != len(samples) {
		t.Errorf("cut 3 at %d of %d", c, len(samples))
	}
	if c := s.Cut(1); c < ms(300) || c > ms(400) {
		t.Errorf("cut 1 at %d ms, want in the silence 300–400 ms", c*1000/Rate)
	}
	if c := s.Cut(2); c < ms(545) || c > ms(565) {
		t.Errorf("cut 2 at %.1f ms, want at the dip 550–560 ms", float64(c)*1000/Rate)
	} else if (samples[c-1] < 0) == (samples[c] < 0) && samples[c] != 0 {
		t.Errorf("cut 2 at %d is not at a zero crossing", c)
	}
	var joined []float32
	for from := 1; from <= 3; from++ {
		joined = append(joined, s.Part(from, from)...)
	}
	if !slices.Equal(joined, samples) {
		t.Error("the parts do not join into the sentence")
	}
	// Played alone, a part fades where its cut lies in sound (after "two"), and nowhere
	// else.
	one, two, three := s.PlayablePart(1, 1), s.PlayablePart(2, 2), s.PlayablePart(3, 3)
	if !slices.Equal(one, s.Part(1, 1)) || !slices.Equal(two[:edgeFade], s.Part(2, 2)[:edgeFade]) || !slices.Equal(three[edgeFade:], s.Part(3, 3)[edgeFade:]) {
		t.Error("a part fades where its cut lies in the quiet, or at the sentence's end")
	}
	if audio.Peak(two[len(two)-edgeFade/4:]) > 0.05*0.2 || audio.Peak(three[:edgeFade/4]) > 0.05*0.2 {
		t.Errorf("the parts do not fade at the cut in sound: end %g, start %g", audio.Peak(two[len(two)-edgeFade/4:]), audio.Peak(three[:edgeFade/4]))
	}
}

func TestSplitSentence(t *testing.T) {
	for _, tc := range []struct {
		marked, text string
		parts        []PartWords
		texts        []string
	}{
		{"i need eggs, | milk, | and some bread", "i need eggs, milk, and some bread", []PartWords{{1, 3}, {4, 4}, {5, 7}}, []string{"i need eggs,", "milk,", "and some bread"}},
		{"what time is it", "what time is it", []PartWords{{1, 4}}, []string{"what time is it"}},
		{" Can  you, um ... |tell me? ", "Can you, um ... tell me?", []PartWords{{1, 3}, {4, 5}}, []string{"Can you, um ...", "tell me?"}},
	} {
		text, parts, err := SplitSentence(tc.marked)
		if err != nil || text != tc.text || !slices.Equal(parts, tc.parts) {
			t.Errorf("%q: %q %v %v", tc.marked, text, parts, err)
			continue
		}
		for i, p := range parts {
			if got := PartText(text, p.From, p.To); got != tc.texts[i] {
				t.Errorf("%q: part %d says %q, want %q", tc.marked, i+1, got, tc.texts[i])
			}
		}
	}
	for _, bad := range []string{"", "|", "i need | | bread", "eggs |", "... | milk", "two 2% milk", "a $5 bill"} {
		if _, _, err := SplitSentence(bad); err == nil {
			t.Errorf("%q split", bad)
		}
	}
}

// FuzzSplitSentence: the parts cover the sentence's words in order, each with a word,
// and every part's text holds its words.
func FuzzSplitSentence(f *testing.F) {
	for _, s := range []string{"i need eggs, | milk, | and some bread", "a|b", "||", "é | ü!", "uh-huh | i'm", "\x00|x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, marked string) {
		text, parts, err := SplitSentence(marked)
		if err != nil {
			return
		}
		words := Words(text)
		next := 1
		for _, p := range parts {
			if p.From != next || p.To < p.From {
				t.Fatalf("%q: parts %v", marked, parts)
			}
			next = p.To + 1
			if got := Words(PartText(text, p.From, p.To)); !slices.Equal(got, words[p.From-1:p.To]) {
				t.Fatalf("%q: part %v says %q", marked, p, got)
			}
		}
		if next != len(words)+1 || strings.Contains(text, CutMark) {
			t.Fatalf("%q: %q, parts %v of %d words", marked, text, parts, len(words))
		}
	})
}

// pocketsphinx's output for "turn on the living room lamp" in an espeak-ng voice.
const alignedLamp = `{"b":0.000,"d":1.880,"p":1.000,"t":"turn on the living room lamp","w":[{"b":0.000,"d":0.070,"p":0.943,"t":"<sil>"},{"b":0.070,"d":0.100,"p":0.913,"t":"turn"},{"b":0.170,"d":0.230,"p":0.869,"t":"on(2)"},{"b":0.400,"d":0.110,"p":0.969,"t":"the"},{"b":0.510,"d":0.330,"p":0.859,"t":"living"},{"b":0.840,"d":0.260,"p":0.9,"t":"room"},{"b":1.100,"d":0.060,"p":0.9,"t":"[NOISE]"},{"b":1.160,"d":0.250,"p":0.9,"t":"lamp"},{"b":1.410,"d":0.460,"p":0.9,"t":"<sil>"}]}`

func TestParseAlignment(t *testing.T) {
	lamp := Words("turn on the living room lamp")
	got, err := parseAlignment([]byte(alignedLamp+"\n"), lamp)
	if err != nil {
		t.Fatal(err)
	}
	want := []Word{{"turn", 1120, 2720}, {"on", 2720, 6400}, {"the", 6400, 8160}, {"living", 8160, 13440}, {"room", 13440, 17600}, {"lamp", 18560, 22560}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for name, tc := range map[string]struct {
		out   string
		words []string
	}{
		"no words found":  {`{"b":0,"d":1.7,"p":1,"t":"","w":[]}`, lamp},
		"other words":     {alignedLamp, Words("turn on the living room light")},
		"not json":        {"ERROR: cannot open file", lamp},
		"negative times":  {`{"w":[{"b":-1,"d":0.1,"t":"stop"}]}`, []string{"stop"}},
		"overlaps":        {`{"w":[{"b":0.5,"d":0.3,"t":"stop"},{"b":0.6,"d":0.3,"t":"it"}]}`, []string{"stop", "it"}},
		"beyond an hour":  {`{"w":[{"b":3599,"d":2,"t":"stop"}]}`, []string{"stop"}},
		"a word too many": {`{"w":[{"b":0,"d":0.1,"t":"stop"},{"b":0.1,"d":0.1,"t":"it"}]}`, []string{"stop"}},
	} {
		if got, err := parseAlignment([]byte(tc.out), tc.words); err == nil {
			t.Errorf("%s: accepted %v", name, got)
		}
	}
}

// FuzzParseAlignment: the aligner's output never panics the parser, and what it accepts
// is the words asked for, in order, each within the hour and after the one before.
func FuzzParseAlignment(f *testing.F) {
	f.Add([]byte(alignedLamp), "turn on the living room lamp")
	f.Add([]byte(`{"w":[{"b":0.2,"d":0.3,"t":"stop(3)"}]}`), "stop")
	f.Add([]byte(`{"w":[{"b":1e308,"d":1e308,"t":"a"}]}`), "a")
	f.Add([]byte(`{"w":[{"t":"("},{"t":"<"}]}`), "a")
	f.Add([]byte(`null`), "")
	f.Fuzz(func(t *testing.T, out []byte, text string) {
		words := strings.Fields(text)
		got, err := parseAlignment(out, words)
		if err != nil {
			return
		}
		if len(got) != len(words) {
			t.Fatalf("%d words for %d", len(got), len(words))
		}
		for i, w := range got {
			if w.Text != words[i] || w.Start < 0 || w.End < w.Start || w.End > 3600*Rate+1 || i > 0 && w.Start < got[i-1].End {
				t.Fatalf("word %d: %+v", i, w)
			}
		}
	})
}

// TestLoadSentenceRejectsABadAlignment: a cache entry whose words lie outside its audio
// is not used.
func TestLoadSentenceRejectsABadAlignment(t *testing.T) {
	dir := t.TempDir()
	c, _ := OpenCache(dir)
	wav, meta := filepath.Join(dir, "s.wav"), filepath.Join(dir, "s.json")
	if err := c.store(wav, make([]float32, 1000)); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{`{"words":[{"text":"a","start":0,"end":2000}]}`, `{"words":[{"text":"a","start":500,"end":600},{"text":"b","start":0,"end":100}]}`, `{`} {
		if err := os.WriteFile(meta, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadSentence(wav, meta); err == nil {
			t.Errorf("%s accepted", data)
		}
	}
	if err := os.WriteFile(meta, []byte(`{"text":"a b","words":[{"text":"a","start":0,"end":400},{"text":"b","start":500,"end":900}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := loadSentence(wav, meta); err != nil || len(s.Words) != 2 || len(s.Samples) != 1000 {
		t.Errorf("a sound entry: %+v, %v", s, err)
	}
}
