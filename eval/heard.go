package eval

import (
	"slices"
	"time"

	"github.com/parley-voice/parley/iu"
)

// AudibleDBFS is the level above which a Window of the agent's output is sound: the
// agent's voice, ducked, lies 25 dB above it; silence, far below.
const AudibleDBFS = -50.0

// explainSlack is how far from the chunks the speaker reported playing a sound in
// agent.wav may lie and still be theirs (a report's position is exact to its 10 ms step;
// a word's edge may fall in the next window).
const explainSlack = 30 * time.Millisecond

// HeardChunk is a speech chunk the listener heard, and when.
type HeardChunk struct {
	Chunk
	// Start and End are when its first sample and the last one heard were heard.
	Start, End time.Duration
	// Fraction is the share of it heard (1: all).
	Fraction float64
	seen     bool
}

// Word is a word of the agent's of which the listener heard something.
type Word struct {
	Turn, Clause, Index int
	Text                string
	// Start and End span what was heard of it.
	Start, End time.Duration
	// Heard is the share of its audio heard.
	Heard float64
	// Audible: agent.wav holds sound within its span; Onset is the first such Window.
	Audible bool
	Onset   time.Duration
}

// Turn is an agent turn the listener heard some of.
type Turn struct {
	ID int
	// Words are its words heard (some of), in the order spoken.
	Words []Word
	// FirstHeard and LastHeard span its audio heard, pauses included.
	FirstHeard, LastHeard time.Duration
	// Cut: some of its words were never heard whole (the speaker stopped it).
	Cut bool
	// Chunks are its chunks heard, in the order played.
	Chunks []HeardChunk
}

// AudibleWords are the words of t that agent.wav confirms were sounding.
func (t *Turn) AudibleWords() []Word {
	var out []Word
	for _, w := range t.Words {
		if w.Audible {
			out = append(out, w)
		}
	}
	return out
}

// FirstAudible is the onset of the turn's first audible word.
func (t *Turn) FirstAudible() (time.Duration, bool) {
	for _, w := range t.Words {
		if w.Audible {
			return w.Onset, true
		}
	}
	return 0, false
}

// The takeover test of Full-Duplex-Bench (its turn_duration_threshold and
// turn_num_words_threshold): speech of the agent takes the turn unless it lasts less
// than a second and holds at most three words.
const (
	takeoverSpan  = time.Second
	takeoverWords = 3
)

// Takeover applies Full-Duplex-Bench's takeover test to the turn's audible words: more
// than three, or a second or more from the first's onset to the last's end.
func (t *Turn) Takeover() bool {
	w := t.AudibleWords()
	if len(w) == 0 {
		return false
	}
	return len(w) > takeoverWords || w[len(w)-1].End-w[0].Onset >= takeoverSpan
}

// HeardWords are the words of t heard enough to count as heard: at least minFraction of
// each (the history's rule for an interrupted turn's last word).
func (t *Turn) HeardWords(minFraction float64) []Word {
	var out []Word
	for _, w := range t.Words {
		if w.Heard >= minFraction-1e-9 {
			out = append(out, w)
		}
	}
	return out
}

// Listening is what the listener heard of the agent, reconstructed from the outputs.
type Listening struct {
	// Turns are the agent turns heard, by when they were first heard.
	Turns []*Turn
	// Unexplained is how much sound agent.wav holds where the speaker reported playing
	// no chunk: a scoring error, or audio the reports do not account for.
	Unexplained time.Duration
	// SilentWords counts words reported heard at least half that agent.wav holds no
	// sound for.
	SilentWords int
	levels      []float64
}

// Turn returns the heard turn id, or nil.
func (l *Listening) Turn(id int) *Turn {
	for _, t := range l.Turns {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// hear reconstructs what the listener heard: which chunks played and when (the
// speaker plays committed chunks in the order they were added, and each report says
// which chunk and how much of it was heard at its position; a chunk between two reports
// played whole, back to back with its neighbours, unless its turn had been stopped),
// then the words and turns, checked against agent.wav's levels.
func hear(o *Outputs) *Listening {
	var order []int
	pos := map[iu.ID]int{}
	for i, c := range o.Chunks {
		if c.Committed && !c.Revoked {
			pos[c.ID] = len(order)
			order = append(order, i)
		}
	}
	h := make([]HeardChunk, len(order))
	stopped := map[int]bool{}
	last := -1
	var cursor time.Duration
	for _, r := range o.Progress {
		j, ok := pos[r.Heard]
		if !ok {
			continue
		}
		c := o.Chunks[order[j]]
		frac := 1.0
		if r.Length > 0 {
			frac = min(float64(r.Offset)/float64(r.Length), 1)
		}
		if j > last && last >= 0 && !stopped[h[last].Turn] && h[last].Fraction < 1 {
			// Playing went past the chunk last reported: it was heard to its end.
			h[last].Fraction, h[last].End = 1, h[last].Start+h[last].Dur
			cursor = max(cursor, h[last].End)
		}
		switch {
		case !h[j].seen && r.State == "idle":
			// An idle report comes when the speaker noticed it had played everything,
			// up to a step after the last sample: the chunk followed the one before.
			h[j] = HeardChunk{Chunk: c, Start: cursor, End: cursor + scale(c.Dur, frac), Fraction: frac, seen: true}
		case !h[j].seen:
			start := r.Pos - scale(c.Dur, frac)
			h[j] = HeardChunk{Chunk: c, Start: start, End: r.Pos, Fraction: frac, seen: true}
		case frac > h[j].Fraction && r.State == "idle":
			h[j].Fraction, h[j].End = frac, h[j].Start+scale(c.Dur, frac)
		case frac > h[j].Fraction:
			h[j].Fraction, h[j].End = frac, r.Pos
		}
		// The chunks between the last reported one and this one were heard whole: those
		// of this chunk's turn just before it, back to back up to it; others after the
		// last one heard.
		next := h[j].Start
		for i := j - 1; i > last; i-- {
			ci := o.Chunks[order[i]]
			if ci.Turn != c.Turn || h[i].seen || stopped[ci.Turn] {
				break
			}
			h[i] = HeardChunk{Chunk: ci, Start: next - ci.Dur, End: next, Fraction: 1, seen: true}
			next = h[i].Start
		}
		for i := last + 1; i < j; i++ {
			ci := o.Chunks[order[i]]
			if h[i].seen || stopped[ci.Turn] {
				continue
			}
			h[i] = HeardChunk{Chunk: ci, Start: cursor, End: cursor + ci.Dur, Fraction: 1, seen: true}
			cursor = h[i].End
		}
		cursor = max(cursor, h[j].End)
		if r.State == "stopped" {
			stopped[c.Turn] = true
		}
		last = max(last, j)
	}

	l := &Listening{levels: o.Levels}
	// Words: their whole length from every chunk committed, what was heard of them from
	// the chunks heard.
	type key struct{ turn, clause, word int }
	total := map[key]time.Duration{}
	for _, i := range order {
		c := o.Chunks[i]
		if c.Word >= 0 {
			total[key{c.Turn, c.Clause, c.Word}] += c.Dur
		}
	}
	wordAt := map[key]int{} // a word's index in its turn's Words
	turns := map[int]*Turn{}
	for j, hc := range h {
		if !hc.seen {
			// A committed word chunk never heard: its turn was cut.
			if c := o.Chunks[order[j]]; c.Word >= 0 {
				if t := turns[c.Turn]; t != nil {
					t.Cut = true
				} else {
					turns[c.Turn] = &Turn{ID: c.Turn, Cut: true, FirstHeard: -1}
				}
			}
			continue
		}
		t := turns[hc.Turn]
		if t == nil {
			t = &Turn{ID: hc.Turn, FirstHeard: -1}
			turns[hc.Turn] = t
		}
		if hc.Fraction <= 0 {
			continue
		}
		if t.FirstHeard < 0 || hc.Start < t.FirstHeard {
			t.FirstHeard = hc.Start
		}
		t.LastHeard = max(t.LastHeard, hc.End)
		t.Chunks = append(t.Chunks, hc)
		if hc.Word < 0 {
			continue
		}
		if hc.Fraction < 1 {
			t.Cut = true
		}
		k := key{hc.Turn, hc.Clause, hc.Word}
		idx, ok := wordAt[k]
		if !ok {
			t.Words = append(t.Words, Word{Turn: hc.Turn, Clause: hc.Clause, Index: hc.Word, Text: hc.Text, Start: hc.Start})
			idx = len(t.Words) - 1
			wordAt[k] = idx
		}
		w := &t.Words[idx]
		w.End = max(w.End, hc.End)
		if d := total[k]; d > 0 {
			w.Heard += scale(hc.Dur, hc.Fraction).Seconds() / d.Seconds()
		} else {
			w.Heard = 1
		}
		w.Heard = min(w.Heard, 1)
	}
	// A word heard whole but for the rounding of its chunks' lengths is heard whole.
	for _, t := range turns {
		for i := range t.Words {
			if t.Words[i].Heard > 0.99 {
				t.Words[i].Heard = 1
			}
		}
	}

	covered := make([]bool, len(o.Levels))
	for _, hc := range h {
		if !hc.seen || hc.Fraction <= 0 {
			continue
		}
		for w := window(hc.Start - explainSlack); w <= window(hc.End+explainSlack) && w < len(covered); w++ {
			if w >= 0 {
				covered[w] = true
			}
		}
	}
	for w, lv := range o.Levels {
		if lv >= AudibleDBFS && !covered[w] {
			l.Unexplained += Window
		}
	}
	for _, t := range turns {
		if t.FirstHeard < 0 {
			continue // never heard: a turn whose audio was all dropped
		}
		for i := range t.Words {
			w := &t.Words[i]
			w.Onset, w.Audible = l.soundIn(w.Start, w.End)
			if !w.Audible && w.Heard >= 0.5 {
				l.SilentWords++
			}
		}
		l.Turns = append(l.Turns, t)
	}
	slices.SortFunc(l.Turns, func(a, b *Turn) int { return int(a.FirstHeard - b.FirstHeard) })
	return l
}

// soundIn returns the start of the first Window from start to end where agent.wav holds
// sound.
func (l *Listening) soundIn(start, end time.Duration) (time.Duration, bool) {
	for w := max(window(start), 0); w < len(l.levels) && time.Duration(w)*Window < end; w++ {
		if l.levels[w] >= AudibleDBFS {
			return max(time.Duration(w)*Window, start), true
		}
	}
	return 0, false
}

// window is the index of the Window holding t.
func window(t time.Duration) int {
	if t < 0 {
		return -1 - int((-t-1)/Window)
	}
	return int(t / Window)
}

// scale is d times f.
func scale(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }
