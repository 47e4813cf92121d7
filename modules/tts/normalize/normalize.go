// Package normalize turns the text an LLM writes into text a speech synthesiser can read
// aloud, and keeps the way back: every byte of the spoken text maps to a byte span of the
// original, so that word timings reported for the spoken text ("three point five") point
// at what the LLM wrote ("3.5").
//
// It expands numbers (cardinals, decimals, thousands separators, negatives, ordinals,
// years and decades, times of day, percentages, ranges), amounts of money ($, €, £, ¥,
// with "million" and the like), common abbreviations (Mr., Dr., e.g., etc.) and symbols
// (&, %, +, =, @, °, ×); it drops the markup an LLM tends to emit (emphasis stars and
// underscores, backticks, headings, list bullets, block quotes, link targets, emoji) and
// reads URLs as their host name. Everything else is copied unchanged, and the synthesiser
// deals with it.
package normalize

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text is the result of Normalize.
type Text struct {
	// Original is the text as given.
	Original string
	// Spoken is the text to synthesise: valid UTF-8 without NUL or other control
	// characters except newline and tab.
	Spoken string
	segs   []Segment
}

// Segment maps a run of the spoken text to the part of the original it came from.
// Segments cover the spoken text without gaps, in order, and their original spans never
// go backwards.
type Segment struct {
	SpokenStart, SpokenEnd int
	OrigStart, OrigEnd     int
	// Literal segments are copied unchanged: byte k of the run is byte k of the original
	// span. Other segments (expansions, replacements, inserted spaces) map as a whole.
	Literal bool
}

// Segments returns the mapping, for inspection.
func (t Text) Segments() []Segment { return append([]Segment(nil), t.segs...) }

// Span maps the byte span [start, end) of the spoken text to a byte span of the original
// on rune boundaries. Inside copied text the mapping is exact; a position inside an
// expansion maps to the whole of what was expanded, so any word of "three point five"
// maps to "3.5". Spans outside the spoken text are clamped to it.
func (t Text) Span(start, end int) (origStart, origEnd int) {
	n := len(t.Spoken)
	start = min(max(start, 0), n)
	end = min(max(end, start), n)
	if len(t.segs) == 0 {
		return 0, 0
	}
	if start == n {
		last := t.segs[len(t.segs)-1]
		return last.OrigEnd, last.OrigEnd
	}
	sg := t.segs[t.find(start)]
	origStart = sg.OrigStart
	if sg.Literal {
		origStart += start - sg.SpokenStart
	}
	if end == start {
		origEnd = origStart
	} else {
		eg := t.segs[t.find(end-1)]
		origEnd = eg.OrigEnd
		if eg.Literal {
			origEnd = eg.OrigStart + (end - eg.SpokenStart)
		}
	}
	origStart = runeFloor(t.Original, origStart)
	origEnd = max(runeCeil(t.Original, origEnd), origStart)
	return origStart, origEnd
}

// find returns the index of the segment holding spoken byte p (0 <= p < len(Spoken)).
func (t Text) find(p int) int {
	return sort.Search(len(t.segs), func(i int) bool { return t.segs[i].SpokenEnd > p })
}

// runeFloor moves i back to the start of the rune it is in. Offsets are rune boundaries
// in Go's reading of the string, where each byte of an invalid sequence is a rune of its own.
func runeFloor(s string, i int) int {
	if i <= 0 || i >= len(s) || utf8.RuneStart(s[i]) {
		return i
	}
	// The nearest byte before i that can start a rune is a boundary: a valid multi-byte
	// rune never contains one after its first byte.
	j := i - 1
	for j > 0 && !utf8.RuneStart(s[j]) && i-j < utf8.UTFMax {
		j--
	}
	if r, size := utf8.DecodeRuneInString(s[j:]); (r != utf8.RuneError || size > 1) && j+size > i {
		return j
	}
	return i // a stray continuation byte
}

// runeCeil moves i forward to the end of the rune it is in.
func runeCeil(s string, i int) int {
	if f := runeFloor(s, i); f != i {
		_, size := utf8.DecodeRuneInString(s[f:])
		return f + size
	}
	return i
}

// Normalize prepares s for speech.
func Normalize(s string) Text {
	b := &builder{src: s, skipAt: -1}
	b.run()
	return Text{Original: s, Spoken: b.out.String(), segs: b.segs}
}

// builder writes the spoken text and its segments while it walks the original once.
type builder struct {
	src  string
	out  strings.Builder
	segs []Segment
	// sep is set after an expansion: a letter or digit that follows gets a space first.
	sep bool
	// skipAt..skipTo is a link target to drop when the walk reaches it.
	skipAt, skipTo int
}

// lastRune is the last rune written, or 0.
func (b *builder) lastRune() rune {
	s := b.out.String()
	if s == "" {
		return 0
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

func (b *builder) add(text string, o0, o1 int, literal bool) {
	if text == "" {
		return
	}
	s0 := b.out.Len()
	b.out.WriteString(text)
	s1 := b.out.Len()
	if n := len(b.segs); n > 0 && literal {
		last := &b.segs[n-1]
		if last.Literal && last.SpokenEnd == s0 && last.OrigEnd == o0 {
			last.SpokenEnd, last.OrigEnd = s1, o1
			return
		}
	}
	b.segs = append(b.segs, Segment{SpokenStart: s0, SpokenEnd: s1, OrigStart: o0, OrigEnd: o1, Literal: literal})
}

// space writes a separating space that stands for no original text (it maps to the empty
// span at o).
func (b *builder) space(o int) { b.add(" ", o, o, false) }

// literal copies src[o0:o1].
func (b *builder) literal(o0, o1 int) {
	if b.sep {
		if r, _ := utf8.DecodeRuneInString(b.src[o0:]); isAlnum(r) {
			b.space(o0)
		}
		b.sep = false
	}
	b.add(b.src[o0:o1], o0, o1, true)
}

// say writes words in place of src[o0:o1], separated by spaces from letters and digits
// around them.
func (b *builder) say(o0, o1 int, words string) {
	if r := b.lastRune(); isAlnum(r) || (r != 0 && !unicode.IsSpace(r) && b.sep) {
		b.space(o0)
	}
	b.add(words, o0, o1, false)
	b.sep = true
}

// drop removes src[o0:o1] (markup); a space stands in where the removal would join two
// words.
func (b *builder) drop(o0, o1 int) {
	next, _ := utf8.DecodeRuneInString(b.src[o1:])
	if isAlnum(b.lastRune()) && isAlnum(next) {
		b.add(" ", o0, o1, false)
	}
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// prevRune is the rune before byte i of the original, or 0.
func (b *builder) prevRune(i int) rune {
	if i == 0 {
		return 0
	}
	r, _ := utf8.DecodeLastRuneInString(b.src[:i])
	return r
}

// atLineStart reports whether only spaces and tabs stand between the start of the line
// and byte i.
func (b *builder) atLineStart(i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch b.src[j] {
		case ' ', '\t':
			continue
		case '\n':
			return true
		default:
			return false
		}
	}
	return true
}

func (b *builder) run() {
	s := b.src
	for i := 0; i < len(s); {
		if i == b.skipAt {
			i, b.skipAt = b.skipTo, -1
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			b.add(" ", i, i+1, false) // invalid UTF-8: a byte the synthesiser cannot read
			i++
			continue
		}
		if isControl(r) {
			b.add(" ", i, i+size, false)
			i += size
			continue
		}
		if n := b.special(i, r, size); n > 0 {
			i = n
			continue
		}
		b.literal(i, i+size)
		i += size
	}
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) ||
		r == '\u2028' || r == '\u2029'
}

// special handles the construct that starts at byte i with rune r, if any, and returns
// the byte offset after it (0 when there is nothing special at i).
func (b *builder) special(i int, r rune, size int) int {
	s := b.src
	prev := b.prevRune(i)
	switch {
	case isDigit(s[i]):
		if isAlnum(prev) {
			return b.alnumRun(i) // part of a word such as "mp3" or "B2B": the synthesiser's business
		}
		if words, end, ok := number(s, i); ok {
			b.say(i, end, words)
			return end
		}
		return b.alnumRun(i)
	case r == '.' && i+1 < len(s) && isDigit(s[i+1]) && !isAlnum(prev):
		if words, end, ok := number(s, i); ok { // ".5"
			b.say(i, end, words)
			return end
		}
	case r == '-' || r == '\u2212' || r == '\u2013':
		return b.dash(i, r, size, prev)
	case r == '$' || r == '€' || r == '£' || r == '¥':
		if words, end, ok := money(s, i, r, size); ok {
			b.say(i, end, words)
			return end
		}
	case r == 'h' || r == 'w' || r == 'H' || r == 'W':
		if !isAlnum(prev) {
			if host, end, ok := url(s, i); ok {
				b.say(i, end, host)
				return end
			}
		}
		return b.word(i, prev)
	case unicode.IsLetter(r):
		return b.word(i, prev)
	}
	return b.symbol(i, r, size, prev)
}

// alnumRun copies a run of letters and digits unchanged.
func (b *builder) alnumRun(i int) int {
	j := i
	for j < len(b.src) {
		r, size := utf8.DecodeRuneInString(b.src[j:])
		if !isAlnum(r) {
			break
		}
		j += size
	}
	b.literal(i, j)
	return j
}

// word handles an abbreviation at a word start, else copies the word.
func (b *builder) word(i int, prev rune) int {
	if !unicode.IsLetter(prev) && prev != '\'' && prev != '’' {
		if words, end, ok := abbreviation(b.src, i); ok {
			b.say(i, end, words)
			return end
		}
	}
	return b.alnumRun(i)
}

func (b *builder) dash(i int, r rune, size int, prev rune) int {
	s := b.src
	next := i + size
	digitNext := next < len(s) && (isDigit(s[next]) || (s[next] == '.' && next+1 < len(s) && isDigit(s[next+1])))
	switch {
	case digitNext && unicode.IsDigit(prev) && isRange(s, next):
		b.say(i, next, "to")
		return next
	case digitNext && !isAlnum(prev) && r != '\u2013':
		if words, end, ok := number(s, next); ok {
			b.say(i, end, "minus "+words)
			return end
		}
	case r == '-' && (next >= len(s) || s[next] == ' ') && b.atLineStart(i):
		b.drop(i, next) // list bullet
		return next
	}
	return 0
}

// isRange reports whether the digits at i end a range such as 2020-2024, rather than
// continuing a dashed code such as a date or a phone number.
func isRange(s string, i int) bool {
	j := i
	for j < len(s) && (isDigit(s[j]) || s[j] == ',' || s[j] == '.') {
		j++
	}
	return !(j+1 < len(s) && (s[j] == '-') && isDigit(s[j+1]))
}

// symbol handles markup and symbols; 0 when r is neither.
func (b *builder) symbol(i int, r rune, size int, prev rune) int {
	s := b.src
	next := i + size
	nextRune, _ := utf8.DecodeRuneInString(s[next:])
	lineStart := b.atLineStart(i)
	switch r {
	case '#':
		if isDigit(byteAt(s, next)) {
			b.say(i, next, "number")
			return next
		}
		j := next
		for j < len(s) && s[j] == '#' {
			j++
		}
		b.drop(i, j)
		return j
	case '*':
		if unicode.IsDigit(prev) && (isDigit(byteAt(s, next)) || byteAt(s, next) == ' ' && isDigit(byteAt(s, next+1))) {
			b.say(i, next, "times")
			return next
		}
		b.drop(i, next)
		return next
	case '_', '`', '|':
		b.drop(i, next)
		return next
	case '~':
		if isDigit(byteAt(s, next)) && prev != '~' {
			b.say(i, next, "about")
			return next
		}
		b.drop(i, next)
		return next
	case '>':
		if lineStart {
			b.drop(i, next)
			return next
		}
	case '+', '•':
		if lineStart && (nextRune == ' ' || next == len(s)) {
			b.drop(i, next)
			return next
		}
		if r == '+' {
			b.say(i, next, "plus")
			return next
		}
		b.drop(i, next)
		return next
	case '[':
		if close, end, ok := link(s, i); ok {
			b.skipAt, b.skipTo = close, end
			return next // the link text is read; the brackets and the target are not
		}
	case '&':
		b.say(i, next, "and")
		return next
	case '%':
		b.say(i, next, "percent")
		return next
	case '=':
		b.say(i, next, "equals")
		return next
	case '@':
		b.say(i, next, "at")
		return next
	case '×':
		b.say(i, next, "times")
		return next
	case '°':
		switch nextRune {
		case 'C':
			b.say(i, next+1, "degrees Celsius")
			return next + 1
		case 'F':
			b.say(i, next+1, "degrees Fahrenheit")
			return next + 1
		}
		b.say(i, next, "degrees")
		return next
	}
	if isDecoration(r) {
		b.drop(i, next)
		return next
	}
	return 0
}

func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// isDecoration reports emoji and other pictographs, with the joiners and selectors that
// build emoji sequences: an LLM's decoration, not words to read out.
func isDecoration(r rune) bool {
	return unicode.Is(unicode.So, r) || r == '\u200d' || r == '\ufe0f' || r == '\ufe0e' ||
		(r >= 0x1f3fb && r <= 0x1f3ff) || (r >= 0xe0020 && r <= 0xe007f)
}

// link recognises a markdown link [text](target) at i and returns the offsets of "]"
// and just after ")".
func link(s string, i int) (close, end int, ok bool) {
	j := i + 1
	for j < len(s) && s[j] != ']' && s[j] != '[' && s[j] != '\n' {
		j++
	}
	if j+1 >= len(s) || s[j] != ']' || s[j+1] != '(' || j == i+1 {
		return 0, 0, false
	}
	k := j + 2
	for k < len(s) && s[k] != ')' && s[k] != ' ' && s[k] != '\n' {
		k++
	}
	if k >= len(s) || s[k] != ')' {
		return 0, 0, false
	}
	return j, k + 1, true
}

// url recognises http://, https:// and www. addresses at i and reads them as their host
// name ("example dot com").
func url(s string, i int) (words string, end int, ok bool) {
	rest := s[i:]
	lower := strings.ToLower(rest[:min(len(rest), 8)])
	var hostStart int
	switch {
	case strings.HasPrefix(lower, "https://"):
		hostStart = i + 8
	case strings.HasPrefix(lower, "http://"):
		hostStart = i + 7
	case strings.HasPrefix(lower, "www."):
		hostStart = i
	default:
		return "", 0, false
	}
	end = hostStart
	for end < len(s) {
		r, size := utf8.DecodeRuneInString(s[end:])
		if unicode.IsSpace(r) || r == '<' || r == '>' || r == '"' || r == ')' || isControl(r) {
			break
		}
		end += size
	}
	for end > hostStart && strings.ContainsRune(".,;:!?'", rune(s[end-1])) {
		end-- // sentence punctuation after the address
	}
	host := s[hostStart:end]
	if k := strings.IndexAny(host, "/?#:"); k >= 0 {
		host = host[:k]
	}
	host = strings.TrimPrefix(strings.ToLower(host), "www.")
	var labels []string
	for _, l := range strings.Split(host, ".") {
		if l != "" && utf8.ValidString(l) {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return "", 0, false
	}
	return strings.Join(labels, " dot "), end, true
}

type abbrev struct {
	text, words string
	// canEnd: the abbreviation's period may also end the sentence.
	canEnd bool
}

func abbreviations() []abbrev {
	return []abbrev{
		{"Mr.", "mister", false}, {"Mrs.", "missus", false}, {"Ms.", "miz", false},
		{"Dr.", "doctor", false}, {"Prof.", "professor", false},
		{"Jr.", "junior", true}, {"Sr.", "senior", true},
		{"e.g.", "for example", false}, {"i.e.", "that is", false},
		{"etc.", "et cetera", true}, {"vs.", "versus", false}, {"approx.", "approximately", false},
		{"a.m.", "a m", true}, {"p.m.", "p m", true}, {"A.M.", "a m", true}, {"P.M.", "p m", true},
	}
}

// abbreviation recognises an abbreviation at i, followed by something other than a letter.
func abbreviation(s string, i int) (words string, end int, ok bool) {
	if !strings.ContainsRune("MDPJSeivapA", rune(s[i])) {
		return "", 0, false // no abbreviation starts with this letter: skip the table
	}
	for _, a := range abbreviations() {
		if !strings.HasPrefix(s[i:], a.text) {
			continue
		}
		end = i + len(a.text)
		next, _ := utf8.DecodeRuneInString(s[end:])
		if unicode.IsLetter(next) {
			continue
		}
		words = a.words
		if a.canEnd && sentenceEndsAt(s, end) {
			words += "."
		}
		return words, end, true
	}
	return "", 0, false
}

// sentenceEndsAt guesses whether a period just before i also ends a sentence: the text
// ends, or a capital letter follows after white space.
func sentenceEndsAt(s string, i int) bool {
	j := i
	for j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t') {
		j++
	}
	if j == len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[j:])
	return j > i && unicode.IsUpper(r)
}
