package turntaking

import (
	"strings"
	"time"
	"unicode"
)

// lexicon is the barge-in's words — the backchannels and the interrupt words — with the
// rules that read the overlap module's decodes and the recogniser's transcripts by
// them (EvidenceConfig). A value built once from the configuration and never changed:
// every rule is a pure function of what it is given.
type lexicon struct {
	ev EvidenceConfig
	// maxBackchannel is the longest a backchannel lasts (BargeInConfig.MaxBackchannel).
	maxBackchannel time.Duration
	// backs holds the backchannels, backWords every word of them ("i" and "see" of "i
	// see"), and interrupts the interrupt words and phrases ("hold on").
	backs, backWords, interrupts map[string]bool
	// longestInterrupt is the most words an interrupt phrase has.
	longestInterrupt int
}

func newLexicon(cfg BargeInConfig) *lexicon {
	l := &lexicon{ev: cfg.Evidence, maxBackchannel: cfg.MaxBackchannel,
		backs: map[string]bool{}, backWords: map[string]bool{}, interrupts: map[string]bool{}}
	backs, interrupts := cfg.WordLists()
	for _, b := range backs {
		l.backs[normalizeWord(b)] = true
		for _, w := range strings.Fields(b) {
			l.backWords[normalizeWord(w)] = true
		}
	}
	for _, w := range interrupts {
		// A phrase ("hold on") is matched word by word (interruptAt).
		var parts []string
		for _, f := range strings.Fields(w) {
			if nf := normalizeWord(f); nf != "" {
				parts = append(parts, nf)
			}
		}
		if len(parts) == 0 {
			continue
		}
		l.interrupts[strings.Join(parts, " ")] = true
		l.longestInterrupt = max(l.longestInterrupt, len(parts))
	}
	return l
}

// normalizeWord lowercases and strips punctuation other than inner hyphens and
// apostrophes, so "Mm-hmm," matches "mm-hmm".
func normalizeWord(w string) string {
	w = strings.ToLower(strings.TrimSpace(w))
	w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return strings.Join(strings.Fields(w), " ")
}

// lexical reports whether a recognised word can be a real word: recognisers render hums
// as strings of letters ("m m h m m").
func lexical(w string) bool { return len([]rune(w)) > 1 || w == "a" || w == "i" }

// realWords counts the words that are not backchannels.
func (l *lexicon) realWords(words []string) int {
	// Multi-word backchannels ("i see") are matched on the whole hypothesis too.
	if len(words) > 0 && l.backs[normalizeWord(strings.Join(words, " "))] {
		return 0
	}
	n := 0
	for _, w := range words {
		if nw := normalizeWord(w); nw != "" && !l.backs[nw] {
			n++
		}
	}
	return n
}

func (l *lexicon) onlyBackchannels(words []string) bool { return l.realWords(words) == 0 }

// backchannelWords returns the words of a decode that are part of a backchannel,
// normalised.
func (l *lexicon) backchannelWords(words []ScoredWord) []string {
	var backs []string
	for _, w := range words {
		if nw := normalizeWord(w.Text); l.backWords[nw] {
			backs = append(backs, nw)
		}
	}
	return backs
}

// hasInterruptWord reports whether words open with an interrupt word or phrase ("stop",
// "hold on") whose words are each at least minConf confident (openingInterrupt).
func (l *lexicon) hasInterruptWord(words []ScoredWord, minConf float32) bool {
	first, conf := l.openingInterrupt(words)
	return first != "" && conf >= minConf
}

// openingInterrupt returns the first word of the interrupt word or phrase that words
// open with ("" if none) and the least confidence among its words: an interruption
// begins with it ("wait, …", "no, I meant …"), or follows a confident backchannel
// ("yeah, but wait"). An interrupt word after other words is more likely a decode's
// guess at a hum or a mumble; a phrase, two words agreeing, may follow one word the
// decode doubts (below DoubtConfidence: its guess at a breath or the start of the
// phrase).
func (l *lexicon) openingInterrupt(words []ScoredWord) (first string, conf float32) {
	doubted := false
	for i, w := range words {
		if n := l.interruptAt(words[i:]); n > 1 || n == 1 && !doubted {
			least := w.Confidence
			for _, pw := range words[i+1 : i+n] {
				least = min(least, pw.Confidence)
			}
			return normalizeWord(w.Text), least
		}
		switch {
		case l.backWords[normalizeWord(w.Text)] && w.Confidence >= l.ev.BackchannelConfidence:
		case w.Confidence < l.ev.DoubtConfidence && !doubted:
			doubted = true
		default:
			return "", 0
		}
	}
	return "", 0
}

// repeatedInterrupt reports whether two decodes in a row open with the same interrupt
// word (or phrases that begin alike: "hold", then "hold on"), one of them giving it at
// least RepeatConfidence. Two different ones are guesses at the start of a word: flite
// awb's "right" decoded "how(1.00)", then "stop(1.00)", on the real clock.
func (l *lexicon) repeatedInterrupt(cur, prev []ScoredWord) bool {
	first, conf := l.openingInterrupt(cur)
	firstBefore, confBefore := l.openingInterrupt(prev)
	return first != "" && first == firstBefore && max(conf, confBefore) >= l.ev.RepeatConfidence
}

// endsInInterrupt reports whether three decodes in a row end in the same interrupt word
// or phrase, each of its words at least WordConfidence confident in each. Over an echo
// canceller's linear output the residue of the agent's voice garbles the start of an
// interruption ("wait, stop" decodes as "you(0.24) can't(0.30) stop(0.85)"), so the
// interrupt word cannot open the decode; a hum's drift of guesses does not end in the
// same confident word three times.
func (l *lexicon) endsInInterrupt(decodes ...[]ScoredWord) bool {
	minConf := l.ev.WordConfidence
	phrase := ""
	for _, words := range decodes {
		p := l.trailingInterrupt(words, minConf)
		if p == "" || phrase != "" && p != phrase {
			return false
		}
		// After backchannel words the interrupt word is more likely the start of the
		// next backchannel ("okay(0.50) no(1.00)" as "okay, okay" goes on).
		for _, w := range words[:len(words)-len(strings.Fields(p))] {
			if l.backWords[normalizeWord(w.Text)] {
				return false
			}
		}
		phrase = p
	}
	return phrase != ""
}

// trailingInterrupt returns the longest interrupt phrase (or word) that ends words with
// each of its words at least minConf confident, "" if none does.
func (l *lexicon) trailingInterrupt(words []ScoredWord, minConf float32) string {
	for n := min(len(words), l.longestInterrupt); n > 0; n-- {
		tail := words[len(words)-n:]
		parts := make([]string, n)
		sure := true
		for i, w := range tail {
			parts[i] = normalizeWord(w.Text)
			sure = sure && w.Confidence >= minConf
		}
		if p := strings.Join(parts, " "); l.interrupts[p] && sure {
			return p
		}
	}
	return ""
}

// interruptAt returns the length in words of the longest interrupt phrase (or word)
// that opens words, 0 if none does.
func (l *lexicon) interruptAt(words []ScoredWord) int {
	for n := min(len(words), l.longestInterrupt); n > 0; n-- {
		parts := make([]string, n)
		for i, w := range words[:n] {
			parts[i] = normalizeWord(w.Text)
		}
		if l.interrupts[strings.Join(parts, " ")] {
			return n
		}
	}
	return 0
}

// confidentLead counts the real words (not part of any backchannel) that open the
// decodes cur, prev and prev2 alike, each at least WordConfidence confident in two of
// the three, or in one of them with none of the three below TurnWordConfidence:
// counting stops at the first word that is neither such a word nor a confident
// backchannel. Not the latest decode alone: a word's confidence sinks as the decodes
// take in more of what follows it ("go" 0.95, 0.85, 0.75 as "forward" comes), and on a
// loaded machine decodes come further apart, so that two of three may see the dip
// ("go" 0.85, 0.68, 0.69 in a live run with both cores busy). A hum's drift of words
// agrees on none of them for long, and doubts them (0.3–0.4).
func (l *lexicon) confidentLead(cur, prev, prev2 []ScoredWord) int {
	ev := l.ev
	n := 0
	for i := 0; i < len(cur) && i < len(prev) && i < len(prev2); i++ {
		w := normalizeWord(cur[i].Text)
		if w != normalizeWord(prev[i].Text) || w != normalizeWord(prev2[i].Text) {
			break
		}
		confident, doubted := 0, false
		for _, c := range []float32{cur[i].Confidence, prev[i].Confidence, prev2[i].Confidence} {
			if c >= ev.WordConfidence {
				confident++
			}
			doubted = doubted || c < ev.TurnWordConfidence
		}
		switch {
		case l.backWords[w] && cur[i].Confidence >= ev.BackchannelConfidence:
		case !l.backWords[w] && lexical(w) && (confident >= 2 || confident == 1 && !doubted):
			n++
		default:
			return n
		}
	}
	return n
}

// steadyWord reports whether a real word (not part of any backchannel) is in each of
// the decodes cur, prev and prev2, wherever they place it, at least
// TurnWordConfidence confident in two of them. A voice's opening can stay in doubt
// (a canceller's residue under "actually" decodes as "the", "two", "little") while the
// words after it hold ("tell(0.6)" in every decode for a second).
func (l *lexicon) steadyWord(cur, prev, prev2 []ScoredWord) bool {
	best := func(dec []ScoredWord, w string) (float32, bool) {
		var c float32
		found := false
		for _, x := range dec {
			if normalizeWord(x.Text) == w {
				c, found = max(c, x.Confidence), true
			}
		}
		return c, found
	}
	for _, x := range cur {
		w := normalizeWord(x.Text)
		if l.backWords[w] || !lexical(w) {
			continue
		}
		sure, inAll := 0, true
		for _, dec := range [][]ScoredWord{cur, prev, prev2} {
			c, ok := best(dec, w)
			inAll = inAll && ok
			if c >= l.ev.TurnWordConfidence {
				sure++
			}
		}
		if inAll && sure >= 2 {
			return true
		}
	}
	return false
}

// stableRealWords counts the real words (not part of any backchannel) at least minConf
// confident that two decodes in a row agree on (their common prefix).
func (l *lexicon) stableRealWords(cur, prev []ScoredWord, minConf float32) int {
	n := 0
	for i := 0; i < len(cur) && i < len(prev); i++ {
		w := normalizeWord(cur[i].Text)
		if w != normalizeWord(prev[i].Text) {
			break
		}
		if !l.backWords[w] && cur[i].Confidence >= minConf {
			n++
		}
	}
	return n
}

// backchannelHeard reports whether the evidence already says backchannel: two decodes
// in a row with the same words, all of them backchannel words at least
// BackchannelConfidence confident; or a hum with no word that would interrupt.
func (l *lexicon) backchannelHeard(s *OverlapSound, prev []ScoredWord) bool {
	ev := l.ev
	if s.Kind == SoundHum && s.DecodedTo >= ev.KeywordSound && !l.hasInterruptWord(s.Words, 0) &&
		l.stableRealWords(s.Words, prev, ev.WordConfidence) == 0 {
		return true
	}
	if len(s.Words) == 0 || prev == nil || !sameScored(s.Words, prev) {
		return false
	}
	texts := make([]string, len(s.Words))
	whole := true // every word a backchannel of its own
	for i, w := range s.Words {
		texts[i] = normalizeWord(w.Text)
		if !l.backWords[texts[i]] || w.Confidence < ev.BackchannelConfidence {
			return false
		}
		whole = whole && l.backs[texts[i]]
	}
	// "i" alone is only the start of "i see".
	if !whole && !l.backs[strings.Join(texts, " ")] {
		return false
	}
	return s.Kind == SoundVoice || s.Kind == SoundHum
}

// wordsBesideBackchannels counts the words of a decode that are neither part of a
// backchannel nor single letters, however confident.
func (l *lexicon) wordsBesideBackchannels(words []ScoredWord) int {
	n := 0
	for _, w := range words {
		if nw := normalizeWord(w.Text); !l.backWords[nw] && lexical(nw) {
			n++
		}
	}
	return n
}

func sameScored(a, b []ScoredWord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if normalizeWord(a[i].Text) != normalizeWord(b[i].Text) {
			return false
		}
	}
	return true
}

// heardWords sorts a transcript's words: real, the different real words, sure, those of
// them of more than one letter at least once confident, and backs, its backchannel
// words. A one-letter word is no sure sign of speech however confident: it is what a
// recogniser makes of a hum's open vowel (flite rms's "hmm" as "a(0.86) champ(0.62)" in
// one of four replays on the real clock, "they(0.19) chairman(0.38)" in the others).
type heardWords struct {
	real, sure map[string]bool
	backs      []string
}

func (l *lexicon) transcriptWords(us ...*Utterance) heardWords {
	h := heardWords{real: map[string]bool{}, sure: map[string]bool{}}
	for _, u := range us {
		for _, w := range u.Words {
			nw := normalizeWord(w.Text)
			switch {
			case nw == "":
			case l.backWords[nw]:
				h.backs = append(h.backs, nw)
			case lexical(nw):
				h.real[nw] = true
				if w.Confidence >= l.ev.TurnWordConfidence && len([]rune(nw)) > 1 {
					h.sure[nw] = true
				}
			}
		}
	}
	return h
}

// transcriptIsSpeech reports whether the transcript of a voice that did not interrupt is
// speech, a turn of its own: two different sure real words (heardWords), or, in a voice
// longer than any backchannel, two different real words however unsure. The latter is
// speech the recogniser heard badly (through the residue of the agent's voice or an echo
// canceller's cuts: "go forward ten meters" as "for over ten meters by", every word
// doubted), not a hum, whose transcripts are letters ("n m h m m") or one word repeated.
// Through an echo canceller's linear output a long hum's transcript can be words too
// ("can the major them for"), and it becomes a turn: a floor on the words' confidence
// lost real speech instead.
func (l *lexicon) transcriptIsSpeech(h heardWords, length time.Duration) bool {
	long := l.maxBackchannel > 0 && length >= l.maxBackchannel
	return len(h.sure) >= 2 || long && len(h.real) >= 2
}
