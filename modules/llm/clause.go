package llm

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ClauseConfig tunes where the clause splitter cuts.
type ClauseConfig struct {
	// MinWords is the fewest words a clause may have (0: 2), so that "Yes," or "Well."
	// is spoken together with what follows instead of on its own. Each CJK character
	// counts as a word.
	MinWords int
	// MaxWords cuts a clause at the next space once it has this many words, for models
	// that write long stretches without punctuation (0: no limit).
	MaxWords int
	// FirstMaxWords cuts the reply's first clause at the next space once it has this
	// many words (0: MaxWords), so that speech starts after a few words even when the
	// first sentence is long: its audio plays while the next clause is generated.
	FirstMaxWords int
	// Abbreviations are extra words (lower case, without the final period) after which a
	// period does not end a sentence, added to the built-in English list.
	Abbreviations []string
}

// isBuiltinAbbreviation lists English abbreviations (lower case, without the period)
// after which a period does not end a sentence. Single letters ("J. K. Rowling") and
// dotted letter groups ("e.g.", "U.S.", "p.m.") are recognised without a list.
func isBuiltinAbbreviation(w string) bool {
	switch w {
	case "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "cf", "fig", "approx",
		"dept", "gen", "gov", "lt", "col", "capt", "sgt", "rev", "hon", "ave", "nos", "vol", "ca", "al":
		return true
	}
	return false
}

// ClauseSplitter cuts a stream of generated text into clauses that text-to-speech can
// start on: it ends a clause at sentence punctuation (. ! ? …), clause punctuation
// (, ; :), full-width CJK punctuation and newlines, but not inside numbers ("3.5",
// "1,000", "10:30"), after abbreviations ("Mr.", "e.g.", "U.S.") or before a lower-case
// word. Quotes and closing brackets after the punctuation stay with the clause.
// Clauses are trimmed of surrounding white space.
//
// The result does not depend on how the text is split into pieces: Push decides a
// boundary only once the text after it settles the question. A ClauseSplitter is used by
// one goroutine.
type ClauseSplitter struct {
	minWords, maxWords int
	firstMaxWords      int
	cut                bool            // a clause was cut already: the first one's limit is over
	abbrev             map[string]bool // extra abbreviations from the config
	buf                string          // the current clause so far, without leading white space
	scan               scanState       // how far buf was scanned without settling a boundary
}

// scanState is where a scan of the current clause stopped, so that the next Push
// resumes there instead of rescanning the clause.
type scanState struct {
	pos    int
	words  int
	inWord bool
}

// NewClauseSplitter returns a splitter with cfg's settings.
func NewClauseSplitter(cfg ClauseConfig) *ClauseSplitter {
	s := &ClauseSplitter{minWords: cfg.MinWords, maxWords: cfg.MaxWords, firstMaxWords: cfg.FirstMaxWords,
		abbrev: make(map[string]bool, len(cfg.Abbreviations))}
	if s.minWords <= 0 {
		s.minWords = 2
	}
	for _, a := range cfg.Abbreviations {
		s.abbrev[strings.TrimSuffix(strings.ToLower(a), ".")] = true
	}
	return s
}

// Push adds generated text and returns the clauses it completed, in order.
func (s *ClauseSplitter) Push(text string) []string {
	s.buf += text
	var out []string
	for {
		if s.scan.pos == 0 {
			s.buf = strings.TrimLeftFunc(s.buf, unicode.IsSpace)
		}
		end, ok, resume := s.boundary(s.buf, s.scan)
		if !ok {
			s.scan = resume
			return out
		}
		out = append(out, strings.TrimRightFunc(s.buf[:end], unicode.IsSpace))
		s.buf = s.buf[end:]
		s.scan = scanState{}
		s.cut = true
	}
}

// Pending returns the clause in progress (trimmed), "" when none has started.
func (s *ClauseSplitter) Pending() string {
	return strings.TrimSpace(s.buf)
}

// Flush ends the stream: it returns the clause in progress as the last clause (or "")
// and resets the splitter.
func (s *ClauseSplitter) Flush() string {
	rest := strings.TrimSpace(s.buf)
	s.buf = ""
	s.scan = scanState{}
	s.cut = false
	return rest
}

// Clause punctuation classes.
func isSentencePunct(r rune) bool {
	switch r {
	case '.', '!', '?', '…', '‼', '⁇', '⁈', '⁉':
		return true
	}
	return false
}

func isClausePunct(r rune) bool { return r == ',' || r == ';' || r == ':' }

// isFullWidthPunct reports CJK punctuation, which ends a clause without a following space.
func isFullWidthPunct(r rune) bool {
	switch r {
	case '。', '！', '？', '，', '、', '；', '：', '｡', '､', '．':
		return true
	}
	return false
}

func isPunct(r rune) bool { return isSentencePunct(r) || isClausePunct(r) || isFullWidthPunct(r) }

// isCloser reports quotes and brackets that close after punctuation: `."` or `!)`.
func isCloser(r rune) bool {
	switch r {
	case '"', '\'', '”', '’', '»', '›', ')', ']', '}', '」', '』', '）', '】', '》', '〉', '〕', '］', '｝':
		return true
	}
	return false
}

func isOpener(r rune) bool {
	switch r {
	case '"', '\'', '“', '‘', '«', '‹', '(', '[', '{', '「', '『', '（', '【', '《', '〈':
		return true
	}
	return false
}

func isNewline(r rune) bool { return r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' }

// isIdeograph reports scripts written without spaces, where each character counts as a word.
func isIdeograph(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

// boundary returns the end of the first complete clause in text, which starts with a
// non-space character, scanning from st. ok is false while no boundary is settled yet;
// resume then says where to continue once more text arrived.
func (s *ClauseSplitter) boundary(text string, st scanState) (end int, ok bool, resume scanState) {
	words, inWord := st.words, st.inWord
	maxWords := s.maxWords
	if !s.cut && s.firstMaxWords > 0 {
		maxWords = s.firstMaxWords
	}
	for i := st.pos; i < len(text); {
		if !utf8.FullRuneInString(text[i:]) {
			return 0, false, scanState{i, words, inWord} // the rest of a character is still to come
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case isIdeograph(r):
			words++
			inWord = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				words++
			}
			inWord = true
		case unicode.IsSpace(r):
			inWord = false
			if isNewline(r) && words >= s.minWords {
				return i, true, scanState{}
			}
			if maxWords > 0 && words >= maxWords && words >= s.minWords {
				return i, true, scanState{}
			}
		case isPunct(r):
			end, decided, cut := s.afterPunct(text, i)
			if !decided {
				return 0, false, scanState{i, words, inWord}
			}
			if cut && words >= s.minWords {
				return end, true, scanState{}
			}
			// Punctuation inside a token ("3.5", "e.g") keeps the word going.
			next, _ := utf8.DecodeRuneInString(text[end:])
			inWord = inWord && end < len(text) && !unicode.IsSpace(next) && !isPunct(next)
			i = end
			continue
		default:
			// Other symbols (dashes, apostrophes inside words, emoji) neither start nor
			// end a word on their own.
			if r != '\'' && r != '’' && r != '-' {
				inWord = false
			}
		}
		i += size
	}
	return 0, false, scanState{len(text), words, inWord}
}

// afterPunct looks at the punctuation run starting at i. It returns where the run and
// its closing quotes end, whether the text settles if this is a boundary (decided), and
// if so whether it is one (cut).
func (s *ClauseSplitter) afterPunct(text string, i int) (end int, decided, cut bool) {
	j, fullWidth := i, false
	for j < len(text) {
		r, size := utf8.DecodeRuneInString(text[j:])
		if !isPunct(r) {
			break
		}
		fullWidth = fullWidth || isFullWidthPunct(r)
		j += size
	}
	k := j
	for k < len(text) {
		r, size := utf8.DecodeRuneInString(text[k:])
		if !isCloser(r) {
			break
		}
		k += size
	}
	if k == len(text) || !utf8.FullRuneInString(text[k:]) {
		return k, false, false // more punctuation or closers may follow
	}
	if fullWidth {
		return k, true, true
	}
	next, _ := utf8.DecodeRuneInString(text[k:])
	if !unicode.IsSpace(next) {
		return k, true, false // "3.5", "1,000", "e.g.", "10:30", "U.S.A"
	}
	if text[i:j] == "." {
		if s.abbreviation(text[:i]) {
			return k, true, false
		}
		// A period followed by a lower-case word is not the end of a sentence
		// ("approx. five", "etc. and"). Wait for that word.
		rest := strings.TrimLeftFunc(text[k:], unicode.IsSpace)
		if rest == "" || !utf8.FullRuneInString(rest) {
			return k, false, false
		}
		if r, _ := utf8.DecodeRuneInString(rest); unicode.IsLower(r) {
			return k, true, false
		}
	}
	return k, true, true
}

// abbreviation reports whether the word at the end of before (the text up to a period)
// is an abbreviation.
func (s *ClauseSplitter) abbreviation(before string) bool {
	w := before[strings.LastIndexFunc(before, unicode.IsSpace)+1:]
	w = strings.TrimLeftFunc(w, isOpener)
	if w == "" {
		return false
	}
	if lw := strings.ToLower(w); isBuiltinAbbreviation(lw) || s.abbrev[lw] {
		return true
	}
	// Initials ("J.") and dotted letter groups ("e.g", "U.S", "p.m"): single letters
	// separated by periods. "I" alone is a word, not an initial.
	if w == "I" {
		return false
	}
	for i, part := range strings.Split(w, ".") {
		if utf8.RuneCountInString(part) != 1 {
			return false
		}
		r, _ := utf8.DecodeRuneInString(part)
		if !unicode.IsLetter(r) || (i == 0 && len(w) == len(part) && !unicode.IsUpper(r)) {
			return false
		}
	}
	return true
}
