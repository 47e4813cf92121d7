package tts

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/modules/tts/normalize"
)

// audioOf builds samples from runs: a positive count is that many non-silent samples, a
// negative count that many zeros.
func audioOf(runs ...int) []float32 {
	var out []float32
	for _, r := range runs {
		if r >= 0 {
			for range r {
				out = append(out, 0.5)
			}
		} else {
			out = append(out, make([]float32, -r)...)
		}
	}
	return out
}

func wordMark(sample int64, word int) labelMark {
	return labelMark{sample: sample, label: label{word: word, start: word * 10, end: word*10 + 5}}
}

type cutSpec struct {
	start int64
	n     int
	word  int
}

func specs(cuts []cut) []cutSpec {
	out := make([]cutSpec, len(cuts))
	for i, c := range cuts {
		out[i] = cutSpec{c.start, len(c.samples), c.label.word}
	}
	return out
}

func TestChunker(t *testing.T) {
	type push struct {
		samples []float32
		marks   []labelMark
		want    []cutSpec // certain after this push
	}
	tests := []struct {
		name   string
		pushes []push
		final  []cutSpec
	}{
		{
			name: "whole chunks, then the rest at the end",
			pushes: []push{
				{audioOf(25), []labelMark{wordMark(0, 0)}, []cutSpec{{0, 10, 0}, {10, 10, 0}}},
			},
			final: []cutSpec{{20, 5, 0}},
		},
		{
			name: "silence before the first word",
			pushes: []push{
				{audioOf(-4, 8), []labelMark{wordMark(4, 0)}, []cutSpec{{0, 4, -1}}},
			},
			final: []cutSpec{{4, 8, 0}},
		},
		{
			name: "a word start cuts the chunk",
			pushes: []push{
				{audioOf(14), []labelMark{wordMark(0, 0), wordMark(7, 1)}, []cutSpec{{0, 7, 0}}},
				{audioOf(13), nil, []cutSpec{{7, 10, 1}, {17, 10, 1}}},
			},
			final: nil,
		},
		{
			name: "a mark that arrives before its audio",
			pushes: []push{
				{audioOf(5), []labelMark{wordMark(0, 0), wordMark(12, 1)}, nil},
				{audioOf(10), nil, []cutSpec{{0, 10, 0}, {10, 2, 0}}},
			},
			final: []cutSpec{{12, 3, 1}},
		},
		{
			name: "a long silence before the next word is a pause",
			pushes: []push{
				{audioOf(6, -12), []labelMark{wordMark(0, 0)}, nil},
				{audioOf(-3, 4), []labelMark{wordMark(21, 1)}, []cutSpec{{0, 6, 0}, {6, 10, -1}, {16, 5, -1}}},
			},
			final: []cutSpec{{21, 4, 1}},
		},
		{
			name: "a short silence stays with its word",
			pushes: []push{
				{audioOf(6, -3), []labelMark{wordMark(0, 0)}, nil},
				{audioOf(4), []labelMark{wordMark(9, 1)}, []cutSpec{{0, 9, 0}}},
			},
			final: []cutSpec{{9, 4, 1}},
		},
		{
			name: "silence followed by more of the same word is not a pause",
			pushes: []push{
				{audioOf(4, -20), []labelMark{wordMark(0, 0)}, nil},
				{audioOf(3), nil, []cutSpec{{0, 10, 0}, {10, 10, 0}}},
			},
			final: []cutSpec{{20, 7, 0}},
		},
		{
			name: "the pause at the end of the clause",
			pushes: []push{
				{audioOf(3, -15), []labelMark{wordMark(0, 0)}, nil},
			},
			final: []cutSpec{{0, 3, 0}, {3, 10, -1}, {13, 5, -1}},
		},
		{
			name: "a late mark applies from the next chunk",
			pushes: []push{
				{audioOf(20), []labelMark{wordMark(0, 0)}, []cutSpec{{0, 10, 0}, {10, 10, 0}}},
				{audioOf(5), []labelMark{wordMark(15, 1)}, nil},
			},
			final: []cutSpec{{20, 5, 1}},
		},
		{
			name: "two marks at one sample",
			pushes: []push{
				{audioOf(6), []labelMark{wordMark(0, 0), wordMark(3, 1), wordMark(3, 2)}, []cutSpec{{0, 3, 0}}},
			},
			final: []cutSpec{{3, 3, 2}},
		},
		{
			name:   "marks beyond the audio are ignored at the end",
			pushes: []push{{audioOf(4), []labelMark{wordMark(0, 0), wordMark(40, 1)}, nil}},
			final:  []cutSpec{{0, 4, 0}},
		},
		{
			name:   "nothing at all",
			pushes: []push{{nil, nil, nil}},
			final:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChunker(10, 8, 0)
			for i, p := range tt.pushes {
				if got := specs(c.push(p.samples, p.marks)); !slices.Equal(got, p.want) {
					t.Fatalf("push %d: %v, want %v", i, got, p.want)
				}
			}
			if got := specs(c.finish(0)); !slices.Equal(got, tt.final) {
				t.Fatalf("finish: %v, want %v", got, tt.final)
			}
		})
	}
}

func TestChunkerPauseLabel(t *testing.T) {
	c := newChunker(100, 5, 0)
	c.push(audioOf(4, -10), []labelMark{{sample: 0, label: label{word: 0, start: 3, end: 9}}})
	cuts := c.finish(0)
	if len(cuts) != 2 || cuts[1].label != (label{word: -1, start: 9, end: 9}) {
		t.Fatalf("cuts %+v; want the pause to sit at the end of the word", cuts)
	}
}

// TestChunkerHold: a word is held until the next word starts, so that its span can take
// in what the engine folded into it; a word longer than the hold streams with its span.
func TestChunkerHold(t *testing.T) {
	w0 := labelMark{sample: 0, label: label{word: 0, start: 0, end: 2}}
	w1 := labelMark{sample: 30, label: label{word: 1, start: 7, end: 10}, prevEnd: 6}
	view := func(cuts []cut) [][5]int {
		var out [][5]int
		for _, c := range cuts {
			out = append(out, [5]int{int(c.start), len(c.samples), c.label.word, c.label.start, c.label.end})
		}
		return out
	}

	c := newChunker(10, 8, 100)
	if cuts := c.push(audioOf(25), []labelMark{w0}); len(cuts) != 0 {
		t.Fatalf("held word emitted early: %v", view(cuts))
	}
	cuts := c.push(audioOf(5, -12, 3), []labelMark{w1})
	want := [][5]int{{0, 10, 0, 0, 6}, {10, 10, 0, 0, 6}, {20, 10, 0, 0, 6}}
	if !slices.Equal(view(cuts), want) {
		t.Fatalf("after the next word started: %v, want %v", view(cuts), want)
	}
	// A held word goes out whole: its chunks know their place in it and its length.
	if got := wordPlaces(cuts); !slices.Equal(got, [][2]int{{0, 30}, {10, 30}, {20, 30}}) {
		t.Fatalf("held word's offsets and lengths %v", got)
	}
	// The last word takes in the rest of the clause's letters at the end.
	if cuts := c.finish(12); !slices.Equal(view(cuts), [][5]int{{30, 10, 1, 7, 12}, {40, 5, 1, 7, 12}}) {
		t.Fatalf("finish: %v", view(cuts))
	}

	// A word longer than the hold streams, and keeps the span it started with.
	// Its chunks carry the length known when they went out (25 samples so far), until
	// its end is known (30).
	c = newChunker(10, 8, 15)
	cuts = c.push(audioOf(25), []labelMark{w0})
	if !slices.Equal(view(cuts), [][5]int{{0, 10, 0, 0, 2}, {10, 10, 0, 0, 2}}) {
		t.Fatalf("long word: %v", view(cuts))
	}
	places := wordPlaces(cuts)
	cuts = c.push(audioOf(5, -12), []labelMark{w1})
	if !slices.Equal(view(cuts), [][5]int{{20, 10, 0, 0, 2}}) {
		t.Fatalf("long word's end: %v", view(cuts))
	}
	if places = append(places, wordPlaces(cuts)...); !slices.Equal(places, [][2]int{{0, 25}, {10, 25}, {20, 30}}) {
		t.Fatalf("long word's offsets and lengths %v", places)
	}

	// The pause after a held word sits at its extended end.
	c = newChunker(10, 8, 100)
	c.push(audioOf(4, -20), []labelMark{w0})
	cuts = c.push(audioOf(6), []labelMark{{sample: 24, label: w1.label, prevEnd: 6}})
	if !slices.Equal(view(cuts), [][5]int{{0, 4, 0, 0, 6}, {4, 10, -1, 6, 6}, {14, 10, -1, 6, 6}}) {
		t.Fatalf("pause: %v", view(cuts))
	}
}

// wordPlaces returns the word offset and length of each cut.
func wordPlaces(cuts []cut) [][2]int {
	var out [][2]int
	for _, c := range cuts {
		out = append(out, [2]int{c.wordOffset, c.wordLength})
	}
	return out
}

// TestChunkerRandom checks the chunker's promises on random streams: the audio comes out
// unchanged, no chunk is longer than the limit or crosses a word start, and every chunk
// carries the word (or pause) at its first sample.
func TestChunkerRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		maxLen, minPause := 1+rng.IntN(30), 1+rng.IntN(20)
		c := newChunker(maxLen, minPause, rng.IntN(3)*rng.IntN(60))
		var in []float32
		var marks []labelMark
		var cuts []cut
		next := int64(rng.IntN(5))
		word := 0
		for range rng.IntN(12) {
			var piece []float32
			for range rng.IntN(6) {
				if rng.IntN(3) == 0 {
					piece = append(piece, audioOf(-rng.IntN(25))...)
				} else {
					piece = append(piece, audioOf(rng.IntN(25))...)
				}
			}
			// Marks come with the audio they fall in, never after it was emitted.
			next = max(next, int64(len(in)))
			in = append(in, piece...)
			var pm []labelMark
			for next <= int64(len(in)) && rng.IntN(4) != 0 {
				m := wordMark(next, word)
				pm = append(pm, m)
				marks = append(marks, m)
				word++
				next += int64(rng.IntN(30))
			}
			cuts = append(cuts, c.push(piece, pm)...)
		}
		cuts = append(cuts, c.finish(0)...)

		// A word's cuts know how much of it came before them and, as far as it was
		// known when they went out, its length: exactly when the hold covered the word.
		total := map[int]int{}
		for _, ct := range cuts {
			if ct.label.word >= 0 {
				total[ct.label.word] += len(ct.samples)
			}
		}
		seen, lastLength := map[int]int{}, map[int]int{}
		for i, ct := range cuts {
			w := ct.label.word
			if w < 0 {
				if ct.wordOffset != 0 || ct.wordLength != 0 {
					t.Fatalf("iter %d: silent cut %d has word offset %d, length %d", iter, i, ct.wordOffset, ct.wordLength)
				}
				continue
			}
			if ct.wordOffset != seen[w] || ct.wordLength < seen[w]+len(ct.samples) || ct.wordLength > total[w] || ct.wordLength < lastLength[w] {
				t.Fatalf("iter %d: cut %d of word %d: offset %d, length %d; %d samples before it, %d in all", iter, i, w, ct.wordOffset, ct.wordLength, seen[w], total[w])
			}
			if total[w] <= c.hold && ct.wordLength != total[w] {
				t.Fatalf("iter %d: word %d of %d samples, held (hold %d), has length %d", iter, w, total[w], c.hold, ct.wordLength)
			}
			seen[w] += len(ct.samples)
			lastLength[w] = ct.wordLength
		}
		var out []float32
		for i, ct := range cuts {
			if len(ct.samples) == 0 || len(ct.samples) > maxLen {
				t.Fatalf("iter %d: cut %d has %d samples (limit %d)", iter, i, len(ct.samples), maxLen)
			}
			if ct.start != int64(len(out)) {
				t.Fatalf("iter %d: cut %d starts at %d after %d samples", iter, i, ct.start, len(out))
			}
			out = append(out, ct.samples...)
			end := ct.start + int64(len(ct.samples))
			want := -1
			for _, m := range marks {
				if m.sample > ct.start && m.sample < end {
					t.Fatalf("iter %d: cut %d (%d..%d) crosses the word start at %d", iter, i, ct.start, end, m.sample)
				}
				if m.sample <= ct.start {
					want = m.label.word
				}
			}
			if ct.label.word == -1 && want != -1 {
				for _, x := range ct.samples {
					if !silent(x) {
						t.Fatalf("iter %d: cut %d is a pause but holds sound", iter, i)
					}
				}
				if ct.label.start != want*10+5 || ct.label.end != ct.label.start {
					t.Fatalf("iter %d: pause label %+v after word %d", iter, ct.label, want)
				}
				continue
			}
			if ct.label.word != want {
				t.Fatalf("iter %d: cut %d at %d labelled word %d, want %d", iter, i, ct.start, ct.label.word, want)
			}
		}
		if !slices.Equal(out, in) {
			t.Fatalf("iter %d: audio changed: %d samples in, %d out", iter, len(in), len(out))
		}
	}
}

func TestWords(t *testing.T) {
	// Marks as espeak reports them for the spoken text, mapped back to the clause.
	clause := "Ørsted's café costs $3.50, déjà vu."
	norm := normalize.Normalize(clause)
	spoken := norm.Spoken
	markOf := func(word string, nth int) Mark {
		i := -1
		for range nth + 1 {
			j := indexFrom(spoken, word, i+1)
			if j < 0 {
				t.Fatalf("%q not in %q", word, spoken)
			}
			i = j
		}
		return Mark{Start: i, End: i + len(word)}
	}
	w := newWords(norm)
	tests := []struct {
		mark   Mark
		change bool
		word   string
	}{
		{markOf("Ørsted", 0), true, "Ørsted's"}, // espeak's length leaves out the 's
		{markOf("café", 0), true, "café"},
		{markOf("costs", 0), true, "costs"},
		{markOf("three", 0), true, "$3.50"},
		{markOf("dollars", 0), false, ""}, // more of the same word
		{markOf("cents", 0), false, ""},
		{markOf("déjà", 0), true, "déjà"},
		{Mark{Start: markOf("déjà", 0).Start + 2, End: markOf("déjà", 0).Start + 7}, false, ""}, // inside the previous word
		{markOf("vu", 0), true, "vu"},
		{Mark{Start: len(spoken) - 1, End: len(spoken) - 1}, false, ""}, // empty
	}
	for i, tt := range tests {
		lm, ok := w.mark(tt.mark)
		if ok != tt.change {
			t.Fatalf("mark %d %+v: change %v, want %v", i, tt.mark, ok, tt.change)
		}
		if l := lm.label; ok && clause[l.start:l.end] != tt.word {
			t.Fatalf("mark %d: word %q, want %q", i, clause[l.start:l.end], tt.word)
		}
	}
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	j := strings.Index(s[from:], sub)
	if j < 0 {
		return -1
	}
	return from + j
}
