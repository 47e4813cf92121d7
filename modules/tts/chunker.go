package tts

import (
	"unicode"
	"unicode/utf8"

	"github.com/parley-voice/parley/modules/tts/normalize"
)

// label says what is being spoken: a word of the clause, or silence (word -1).
type label struct {
	word       int
	start, end int // byte span in the clause text
}

// labelMark changes the label from sample on.
type labelMark struct {
	sample int64
	label  label
	// prevEnd is where the word before it really ends: espeak folds some short words
	// into the word before them ("on the cat" reports "on" and "cat"), so the text up to
	// the last letter before the new word was spoken with the previous word.
	prevEnd int
}

// cut is a piece of audio with one label, ready to become a Chunk.
type cut struct {
	start   int64
	samples []float32
	label   label
	// wordOffset and wordLength place a word's cut in the word's audio (see
	// Chunk.WordOffset); both are 0 for silence.
	wordOffset, wordLength int
}

// silenceLevel is the largest magnitude counted as silence: below one step of 16-bit PCM,
// so only digital silence counts (which is what espeak-ng writes for pauses).
const silenceLevel = 1.0 / 65536

func silent(x float32) bool { return x < silenceLevel && x > -silenceLevel }

// chunker cuts a stream of audio into chunks of at most maxLen samples that never cross
// a label change, and labels the silence at the end of a word as a pause when it lasts
// at least minPause samples and reaches the next word (or the end).
//
// It emits audio only once its label is certain: audio up to a known word start, and
// never the trailing silence of a stretch before it knows whether speech or a word start
// follows it. It holds a word's audio until the next word starts (up to hold samples), so
// that the word's span can take in the words folded into it; past that it streams the
// word with the span it has. It is used by one goroutine.
type chunker struct {
	maxLen, minPause int
	hold             int
	pos              int64     // stream position of buf[0]
	buf              []float32 // received, not yet emitted
	marks            []labelMark
	cur              label
	curSent          bool // a chunk with the current label was emitted: its span is fixed
	curEmitted       int  // samples emitted with the current label
}

func newChunker(maxLen, minPause, hold int) *chunker {
	return &chunker{maxLen: max(maxLen, 1), minPause: max(minPause, 1), hold: max(hold, 0), cur: label{word: -1}}
}

// push adds audio and label changes and returns the chunks that are now certain. Marks
// must come in order; one that lies in audio already emitted applies from the next chunk.
func (c *chunker) push(samples []float32, marks []labelMark) []cut {
	c.buf = append(c.buf, samples...)
	c.marks = append(c.marks, marks...)
	return c.process(false, 0)
}

// finish returns the rest of the audio; lastEnd is where the last word really ends (see
// labelMark.prevEnd).
func (c *chunker) finish(lastEnd int) []cut {
	return c.process(true, lastEnd)
}

func (c *chunker) process(final bool, lastEnd int) []cut {
	var out []cut
	for {
		for len(c.marks) > 0 && c.marks[0].sample <= c.pos {
			c.cur = c.marks[0].label
			c.curSent = false
			c.curEmitted = 0
			c.marks = c.marks[1:]
		}
		if len(c.buf) == 0 {
			return out
		}
		end := c.pos + int64(len(c.buf))
		n, terminated := len(c.buf), final
		wordEnd := lastEnd
		if len(c.marks) > 0 && c.marks[0].sample <= end {
			n, terminated = int(c.marks[0].sample-c.pos), true
			wordEnd = c.marks[0].prevEnd
		}
		z := n // start of the silence that ends the stretch
		for z > 0 && silent(c.buf[z-1]) {
			z--
		}
		if !terminated {
			// More audio may extend the stretch: emit only whole chunks, and hold back the
			// trailing silence, which may yet turn out to be a pause. A word is held whole
			// until its end is known, unless it runs longer than hold.
			if c.cur.word >= 0 && !c.curSent && z <= c.hold {
				return out
			}
			// The word's end is not known yet: its length so far is what was emitted and
			// what is buffered up to the silence.
			whole := z / c.maxLen * c.maxLen
			out = c.emit(out, whole, c.cur, c.curEmitted+z)
			return out
		}
		if c.cur.word >= 0 && !c.curSent && wordEnd > c.cur.end {
			c.cur.end = wordEnd
		}
		pause := n
		if c.cur.word >= 0 && n-z >= c.minPause {
			pause = z
		}
		out = c.emit(out, pause, c.cur, c.curEmitted+pause)
		out = c.emit(out, n-pause, label{word: -1, start: c.cur.end, end: c.cur.end}, 0)
	}
}

// emit cuts the first n buffered samples into chunks labelled l; wordLength is the
// length of l's word in samples (as far as it is known), unused for silence.
func (c *chunker) emit(out []cut, n int, l label, wordLength int) []cut {
	for n > 0 {
		k := min(n, c.maxLen)
		next := cut{start: c.pos, samples: append([]float32(nil), c.buf[:k]...), label: l}
		if l == c.cur {
			c.curSent = true
			if l.word >= 0 {
				next.wordOffset, next.wordLength = c.curEmitted, wordLength
			}
			c.curEmitted += k
		}
		out = append(out, next)
		c.buf = c.buf[k:]
		c.pos += int64(k)
		n -= k
	}
	if len(c.buf) == 0 {
		c.buf = c.buf[:0:0] // let the emitted audio go
	}
	return out
}

// words numbers the words of one clause from the engine's marks: each mark's span in the
// spoken text is mapped back to the clause text, and a mark that does not move past the
// current word (the three spoken words of "3.5", or a mark espeak placed inside the
// previous word) continues that word.
type words struct {
	norm  normalize.Text
	index int
	end   int
}

func newWords(norm normalize.Text) *words { return &words{norm: norm, index: -1} }

// mark returns the label change for m, or false when m continues the current word.
func (w *words) mark(m Mark) (labelMark, bool) {
	a, b := w.norm.Span(m.Start, m.End)
	text := w.norm.Original
	for a < b {
		r, size := utf8.DecodeRuneInString(text[a:])
		if !unicode.IsSpace(r) {
			break
		}
		a += size
	}
	for b > a {
		r, size := utf8.DecodeLastRuneInString(text[:b])
		if !unicode.IsSpace(r) {
			break
		}
		b -= size
	}
	if a >= b || (w.index >= 0 && a < w.end) {
		return labelMark{}, false
	}
	prevEnd := w.spokenUpTo(a)
	b = wordTail(text, b)
	w.index++
	w.end = b
	return labelMark{sample: m.Sample, label: label{word: w.index, start: a, end: b}, prevEnd: prevEnd}, true
}

// spokenUpTo returns where the current word really ends when the next word starts at a:
// after the last letter or digit before a (words the engine folded into it), and never
// before the current word's own end.
func (w *words) spokenUpTo(a int) int {
	if w.index < 0 {
		return 0
	}
	end := w.end
	for i := w.end; i < a; {
		r, size := utf8.DecodeRuneInString(w.norm.Original[i:])
		i += size
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			end = i
		}
	}
	return end
}

// lastEnd is where the last word really ends, at the end of the clause.
func (w *words) lastEnd() int { return w.spokenUpTo(len(w.norm.Original)) }

// wordTail extends a word that ends at b inside a run of letters over the rest of the run
// (espeak leaves the "'s" of "Ørsted's" out of the word's length).
func wordTail(text string, b int) int {
	if b == 0 {
		return b
	}
	if prev, _ := utf8.DecodeLastRuneInString(text[:b]); !unicode.IsLetter(prev) && !unicode.IsDigit(prev) && !unicode.IsMark(prev) {
		return b
	}
	for b < len(text) {
		r, size := utf8.DecodeRuneInString(text[b:])
		switch {
		case unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b += size
		case r == '\'' || r == '\u2019':
			next, _ := utf8.DecodeRuneInString(text[b+size:])
			if !unicode.IsLetter(next) {
				return b
			}
			b += size
		default:
			return b
		}
	}
	return b
}
