package espeak

import (
	"unicode"
	"unicode/utf8"
)

// espeak reports text positions in characters (Unicode code points, 1-based) when it reads
// UTF-8; Go strings are indexed in bytes. These helpers convert between the two.

// charOffsets returns the byte offset of every character of a valid UTF-8 text, followed
// by len(text).
func charOffsets(text string) []int {
	offs := make([]int, 0, len(text)+1)
	for i := range text {
		offs = append(offs, i)
	}
	return append(offs, len(text))
}

// charAt converts espeak's 1-based character position to a byte offset, clamped to the
// text.
func charAt(offs []int, pos int) int {
	i := pos - 1
	if i < 0 {
		i = 0
	}
	if i > len(offs)-1 {
		i = len(offs) - 1
	}
	return offs[i]
}

// wordSpan converts a word event's position and length to a byte span of text.
func wordSpan(text string, offs []int, pos, length int) (start, end int) {
	i := pos - 1
	n := len(offs) - 1 // characters in the text
	if i < 0 {
		i = 0
	}
	if i > n {
		i = n
	}
	k := i + length
	if k > n {
		k = n
	}
	if k < i {
		k = i
	}
	start, end = offs[i], offs[k]
	if end == start {
		end = wordEnd(text, start)
	}
	return start, end
}

// wordEnd returns the end of the word that starts at byte offset start: letters, marks
// and digits, and apostrophes between letters. espeak reports a zero length for some
// words (the first word after an opening quotation mark, for one); this recovers a
// usable span for them.
func wordEnd(text string, start int) int {
	i := start
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			i += size
		case (r == '\'' || r == '\u2019') && i > start:
			next, _ := utf8.DecodeRuneInString(text[i+size:])
			if !unicode.IsLetter(next) {
				return i
			}
			i += size
		default:
			return i
		}
	}
	return i
}
