package dialogue

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parley-voice/parley/internal/ellipsis"
)

// Position is where in the agent's text the listener is: the word being heard and how
// much of it. The speaker reports it (the TTS's chunks know their words), the turn-taking
// policy keeps the latest one of the agent turn under way, and Align cuts an interrupted
// turn at it.
//
// Offsets are byte offsets into the UTF-8 text of the clause (the project's "character
// offsets"). The TTS tags every audio chunk with the byte span of the word it speaks;
// WordStart and WordEnd are that span for the chunk being heard, and WordFraction is how
// much of that word's audio has been played (samples of the word heard / samples of the
// word). Everything before WordStart in the clause, and every earlier clause, was heard
// completely.
type Position struct {
	// TurnID and ClauseID name the agent turn and the clause within it (the LLM module
	// numbers a turn's clauses 0, 1, 2, ...).
	TurnID, ClauseID int
	// Clause is the clause's text as generated, which WordStart and WordEnd point into.
	Clause string
	// WordStart and WordEnd span the word being heard. Equal values mean no word is in
	// progress (a pause): the clause was heard up to WordStart (len(Clause): to its end).
	WordStart, WordEnd int
	// WordFraction is the share of the word's audio the listener heard, from 0 to 1 (0 in
	// pauses).
	WordFraction float64
}

// Heard is how far the listener heard an interrupted agent turn: the position where its
// audio stopped, among the turn's clauses.
type Heard struct {
	Position
	// Clauses are the clause texts as generated, in order. Concatenated (with any white
	// space between them) they are the agent's full generated utterance. Align reads the
	// clause being heard from them (Clauses[ClauseID]), not from Position.Clause.
	Clauses []string
	// Start and End are when the listener heard the turn, from its first sample to its
	// last (zero: not known); the stored utterance takes them.
	Start, End time.Time
}

// DefaultMinWordFraction is how much of a word's audio must have been heard for the word
// to count as heard. Listeners recognise most words well before their end, and a word cut
// off after half its sound was, in practice, understood.
const DefaultMinWordFraction = 0.5

// AlignOptions tune Align.
type AlignOptions struct {
	// MinWordFraction: the word in progress counts as heard when WordFraction is at least
	// this. 0 means DefaultMinWordFraction; 1 counts only words heard to their end; to
	// count any partly heard word use a tiny positive value.
	MinWordFraction float64
}

func (o AlignOptions) minWordFraction() float64 {
	if o.MinWordFraction <= 0 || math.IsNaN(o.MinWordFraction) {
		return DefaultMinWordFraction
	}
	return o.MinWordFraction
}

// Alignment is what Align found.
type Alignment struct {
	// Text is what the listener heard: a prefix of the full text, cut at a word boundary,
	// without trailing white space.
	Text string
	// Cut is the byte offset in the full text where the heard part ends (Text is full[:Cut]
	// without trailing white space).
	Cut int
	// ClauseComplete reports that the clause being heard was heard to its end, so its
	// closing punctuation is kept.
	ClauseComplete bool
}

// Errors of Align.
var (
	ErrClauseMismatch = errors.New("clause texts do not match the generated utterance")
	ErrBadHeard       = errors.New("invalid heard report")
)

// Align works out what the listener heard of the agent's utterance full.
//
// Rules:
//   - Clauses before h.ClauseID were heard completely, clauses after it not at all.
//   - In the clause being heard, a word counts as heard when its whole span lies before
//     the heard offset. The heard offset is WordEnd when WordFraction >= MinWordFraction
//     and WordStart otherwise. Offsets that fall inside a UTF-8 sequence are moved to the
//     sequence's edge (WordStart back, WordEnd forward); offsets outside the clause are
//     clamped to it.
//   - Words are the ones wordSpans finds: numbers such as "3.5", "1,000", "10:30", "-4",
//     "$5" and "50%" are single words, as are "can't" and "well-known", so they are
//     never cut inside even when the TTS speaks them as several words. Han and kana
//     characters are words of their own.
//   - The text is cut right after the last heard word, so punctuation after it ("today?")
//     is dropped, unless the clause was heard to its end (its last word was heard, or the
//     offset reached the clause's end): then the whole clause is kept.
//   - Clauses must be found in full in order, allowing only white space between and
//     around them; otherwise the error wraps ErrClauseMismatch. Text after the last
//     clause (a clause the TTS never received) is ignored.
func Align(full string, h Heard, opts AlignOptions) (Alignment, error) {
	if len(h.Clauses) == 0 {
		return Alignment{}, nil // nothing was synthesised, so nothing was heard
	}
	if h.ClauseID < 0 || h.ClauseID >= len(h.Clauses) {
		return Alignment{}, fmt.Errorf("%w: clause %d of %d", ErrBadHeard, h.ClauseID, len(h.Clauses))
	}
	spans, err := locateClauses(full, h.Clauses)
	if err != nil {
		return Alignment{}, err
	}
	clause := h.Clauses[h.ClauseID]
	ws, we := clampSpan(clause, h.WordStart, h.WordEnd)
	heardEnd := ws
	frac := h.WordFraction
	if math.IsNaN(frac) {
		frac = 0
	}
	if we > ws && frac >= opts.minWordFraction() {
		heardEnd = we
	}

	words := wordSpans(clause)
	keptEnd := 0
	for _, w := range words {
		if w.end > heardEnd {
			break
		}
		keptEnd = w.end
	}
	complete := heardEnd >= len(clause)
	if len(words) > 0 && words[len(words)-1].end <= heardEnd {
		complete = true
	}
	cutInClause := keptEnd
	if complete {
		cutInClause = len(clause)
	}
	cut := spans[h.ClauseID].toFull(cutInClause)
	return Alignment{
		Text:           strings.TrimRightFunc(full[:cut], unicode.IsSpace),
		Cut:            cut,
		ClauseComplete: complete,
	}, nil
}

// HeardText is what the history keeps of an agent turn cut at p (Align on the clauses
// joined, as History.CutInterrupted cuts a turn it had not stored): clauses are the
// turn's clause texts as generated, at least up to p.ClauseID. A display that shows it
// while the turn plays shows what an interruption would leave of it.
func HeardText(clauses []string, p Position, opts AlignOptions) (string, error) {
	res, err := Align(JoinClauses(clauses), Heard{Position: p, Clauses: clauses}, opts)
	return res.Text, err
}

// JoinClauses rebuilds an utterance from its clauses: clauses are concatenated, with one
// space added where neither side of the joint has white space.
func JoinClauses(clauses []string) string {
	var b strings.Builder
	for i, c := range clauses {
		if i > 0 && b.Len() > 0 && c != "" {
			last, _ := utf8.DecodeLastRuneInString(b.String())
			first, _ := utf8.DecodeRuneInString(c)
			if !unicode.IsSpace(last) && !unicode.IsSpace(first) {
				b.WriteByte(' ')
			}
		}
		b.WriteString(c)
	}
	return b.String()
}

// clauseSpan places a clause in the full text: its trimmed text starts at fullStart and
// is coreLen bytes long; lead is the clause's leading white space.
type clauseSpan struct{ fullStart, lead, coreLen int }

// toFull maps a byte offset in the clause to one in the full text.
func (c clauseSpan) toFull(o int) int {
	o -= c.lead
	o = max(0, min(o, c.coreLen))
	return c.fullStart + o
}

func locateClauses(full string, clauses []string) ([]clauseSpan, error) {
	spans := make([]clauseSpan, len(clauses))
	pos := 0
	for i, c := range clauses {
		core := strings.TrimSpace(c)
		lead := len(c) - len(strings.TrimLeftFunc(c, unicode.IsSpace))
		pos = len(full) - len(strings.TrimLeftFunc(full[pos:], unicode.IsSpace))
		end := pos + len(core)
		if !strings.HasPrefix(full[pos:], core) || (end < len(full) && !utf8.RuneStart(full[end])) {
			return nil, fmt.Errorf("%w: clause %d %q not found at byte %d", ErrClauseMismatch, i, ellipsis.Cut(core, 40), pos)
		}
		spans[i] = clauseSpan{fullStart: pos, lead: lead, coreLen: len(core)}
		pos += len(core)
	}
	return spans, nil
}

// clampSpan clamps [start, end) into s and onto rune boundaries.
func clampSpan(s string, start, end int) (int, int) {
	start = max(0, min(start, len(s)))
	end = max(start, min(end, len(s)))
	for start > 0 && start < len(s) && !utf8.RuneStart(s[start]) {
		start--
	}
	for end < len(s) && !utf8.RuneStart(s[end]) {
		end++
	}
	return start, end
}

type span struct{ start, end int }

type runeAt struct {
	r    rune
	at   int
	size int
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r)
}

// isOwnWord reports characters of scripts written without spaces, where every character
// is a word for cutting purposes.
func isOwnWord(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

func isSignOrCurrency(r rune) bool {
	return r == '-' || r == '+' || r == '−' || unicode.Is(unicode.Sc, r)
}

// joinsWord reports whether rs[j], which is not a word character, continues the word
// that ends at rs[j-1].
func joinsWord(rs []runeAt, j int) bool {
	prev, c := rs[j-1].r, rs[j].r
	var next rune = -1
	if j+1 < len(rs) {
		next = rs[j+1].r
	}
	switch c {
	case '\'', '’', '-', '‐', '‑', '_':
		return isWordRune(prev) && next >= 0 && isWordRune(next) && !isOwnWord(next)
	case '.', ',', ':', '/':
		return unicode.IsDigit(prev) && next >= 0 && unicode.IsDigit(next)
	case '%', '‰':
		return unicode.IsDigit(prev)
	}
	return unicode.Is(unicode.Sc, c) && unicode.IsDigit(prev)
}

// wordSpans returns the byte spans of the words of s, in order. See Align for what a word
// is.
func wordSpans(s string) []span {
	rs := make([]runeAt, 0, len(s))
	for at, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[at:])
		}
		rs = append(rs, runeAt{r, at, size})
	}
	end := func(k int) int { return rs[k].at + rs[k].size }
	var out []span
	for i := 0; i < len(rs); {
		r := rs[i].r
		if isOwnWord(r) {
			j := i + 1
			for j < len(rs) && unicode.IsMark(rs[j].r) {
				j++
			}
			out = append(out, span{rs[i].at, end(j - 1)})
			i = j
			continue
		}
		startsNumber := isSignOrCurrency(r) && i+1 < len(rs) && unicode.IsDigit(rs[i+1].r)
		if !isWordRune(r) && !startsNumber {
			i++
			continue
		}
		j := i + 1
		for j < len(rs) {
			c := rs[j].r
			if isOwnWord(c) {
				break
			}
			if isWordRune(c) || joinsWord(rs, j) {
				j++
				continue
			}
			break
		}
		out = append(out, span{rs[i].at, end(j - 1)})
		i = j
	}
	return out
}
