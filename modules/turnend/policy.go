// Package turnend decides when the user's turn is over. The VAD hears silence; whether
// that silence ends the turn depends on what was said ("what time is it" is complete,
// "turn on the" is not) and on what a language model expects next. A Policy turns those
// signals into the silence that must pass before the turn ends; the Decider (pure, no
// clock) applies it to the VAD's segments and the recogniser's words as audio arrives,
// and the Module adapts it to IUs, producing the network's vad.EndOfTurn IUs.
package turnend

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/parley-voice/parley/modules/turnend/prosody"
)

// Signals is what a policy knows when it decides.
type Signals struct {
	// Words are the recogniser's words of the turn so far, oldest first.
	Words []string
	// Fresh says the words cover the speech up to its end: the recogniser has caught up.
	// Stale words (the last one ended well before the speech did) may miss a trailing
	// "and", so policies must not trust them to say the turn is complete.
	Fresh bool
	// Complete is the language model's probability that the user's turn is complete after
	// Words (the probability of the prompt format's end-of-user-turn token); it is valid
	// only when HasComplete is set. CompleteMax is the most it can be: a server that
	// lists only its likeliest tokens leaves the rest unknown. It is never below Complete,
	// and equals it when the probability is known exactly.
	Complete, CompleteMax float64
	HasComplete           bool
	// Prosody is how the speech before the silence ended: its pitch falling into the
	// speaker's low register, or staying level (more to come).
	Prosody prosody.Cue
}

// Decision is a policy's answer: the silence after the user's speech that ends the turn,
// and why (for logs and timelines).
type Decision struct {
	Hold   time.Duration
	Reason string
}

// Policy decides how much silence ends the user's turn.
type Policy interface {
	Decide(s Signals) Decision
}

// Silence ends the turn after a fixed silence, whatever was said: the classic policy,
// the incremental and turn-based pipelines'.
type Silence struct{ After time.Duration }

// Decide implements Policy.
func (p Silence) Decide(Signals) Decision {
	return Decision{Hold: p.After, Reason: "silence"}
}

// Holds are the three silences the predictive policies choose between.
type Holds struct {
	// Short ends a turn that is surely complete. The predictive pipeline's VAD merges
	// gaps of at most this and its pad (vad.merge_gap), so that the segment ends in time.
	Short time.Duration `yaml:"short"`
	// Default ends a turn nothing speaks for or against.
	Default time.Duration `yaml:"default"`
	// Long waits for a user who has not finished ("turn on the …").
	Long time.Duration `yaml:"long"`
}

// Words ends the turn by what its last words say about it, with any recogniser and any
// LLM engine: a trailing article, conjunction, preposition, possessive or filler means
// the user has more to say.
type Words struct {
	Holds   Holds
	Lexicon *Lexicon
}

// Decide implements Policy.
func (p Words) Decide(s Signals) Decision {
	if w, ok := p.Lexicon.Incomplete(s.Words); ok {
		return Decision{Hold: p.Holds.Long, Reason: fmt.Sprintf("ends with %q", w)}
	}
	return Decision{Hold: p.Holds.Default, Reason: "no trailing word signal"}
}

// Predictive combines the word signals with the language model's probability that the
// turn is complete. Grammar wins: a turn that ends with "the" waits long whatever the
// model says (a small model is easily fooled by unpunctuated text). Otherwise a model
// that finds the turn complete shortens the wait, one that finds it incomplete lengthens
// it, and without a (fresh) model answer the default applies.
type Predictive struct {
	Holds Holds
	// CompleteAbove and IncompleteBelow are the probability thresholds.
	CompleteAbove   float64
	IncompleteBelow float64
	Lexicon         *Lexicon
	// Pitch: a level pitch before the silence keeps the short hold off (Signals.Prosody).
	Pitch bool
}

// Decide implements Policy.
func (p Predictive) Decide(s Signals) Decision {
	if w, ok := p.Lexicon.Incomplete(s.Words); ok {
		return Decision{Hold: p.Holds.Long, Reason: fmt.Sprintf("ends with %q", w)}
	}
	switch {
	case len(s.Words) == 0:
		return Decision{Hold: p.Holds.Default, Reason: "no words yet"}
	case !s.HasComplete:
		return Decision{Hold: p.Holds.Default, Reason: "no completion estimate"}
	case s.Complete >= p.CompleteAbove && s.Fresh && p.Pitch && s.Prosody == prosody.Level:
		// Words that could end a sentence, said with the level pitch of a list's item
		// or a hesitation ("pack a hat, …"): the short hold would cut in.
		return Decision{Hold: p.Holds.Default, Reason: fmt.Sprintf("complete (p=%s) but the pitch stays level", probability(s))}
	case s.Complete >= p.CompleteAbove && s.Fresh:
		return Decision{Hold: p.Holds.Short, Reason: fmt.Sprintf("complete (p=%s)", probability(s))}
	case s.CompleteMax < p.IncompleteBelow:
		return Decision{Hold: p.Holds.Long, Reason: fmt.Sprintf("incomplete (p=%s)", probability(s))}
	}
	return Decision{Hold: p.Holds.Default, Reason: fmt.Sprintf("undecided (p=%s)", probability(s))}
}

// HearsPitch reports whether the policy reads Signals.Prosody.
func (p Predictive) HearsPitch() bool { return p.Pitch }

// probability formats the model's estimate, as a range when it is not known exactly.
func probability(s Signals) string {
	if s.CompleteMax > s.Complete {
		return fmt.Sprintf("%.2f–%.2f", s.Complete, s.CompleteMax)
	}
	return fmt.Sprintf("%.2f", s.Complete)
}

// Lexicon holds the words after which a speaker has more to say, for one language.
type Lexicon struct {
	Language string
	wait     map[string]bool
	phrases  [][]string // multi-word entries ("you know"), matched at the end
}

// NewLexicon returns the lexicon for language ("en" has a built-in list), with extra
// words added; words removes entries (prefix them with "-" in extra).
func NewLexicon(language string, extra []string) (*Lexicon, error) {
	base, ok := builtinWaitWords[strings.ToLower(language)]
	if !ok && len(extra) == 0 {
		return nil, fmt.Errorf("turnend: no built-in word list for language %q; give wait_words", language)
	}
	l := &Lexicon{Language: language, wait: map[string]bool{}}
	add := func(w string) {
		w = normalize(w)
		switch {
		case w == "":
		case strings.Contains(w, " "):
			l.phrases = append(l.phrases, strings.Fields(w))
		default:
			l.wait[w] = true
		}
	}
	for _, w := range base {
		add(w)
	}
	for _, w := range extra {
		if rest, remove := strings.CutPrefix(strings.TrimSpace(w), "-"); remove {
			delete(l.wait, normalize(rest))
			continue
		}
		add(w)
	}
	return l, nil
}

// Incomplete reports whether words end with a word (or phrase) that says more is coming,
// and which.
func (l *Lexicon) Incomplete(words []string) (string, bool) {
	if l == nil || len(words) == 0 {
		return "", false
	}
	last := normalize(words[len(words)-1])
	if l.wait[last] {
		return last, true
	}
	for _, ph := range l.phrases {
		if len(ph) > len(words) {
			continue
		}
		tail := words[len(words)-len(ph):]
		match := true
		for i := range ph {
			if normalize(tail[i]) != ph[i] {
				match = false
				break
			}
		}
		if match {
			return strings.Join(ph, " "), true
		}
	}
	return "", false
}

// normalize lowercases a word and strips surrounding punctuation ("The," → "the").
func normalize(w string) string {
	w = strings.ToLower(strings.TrimSpace(w))
	w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	return strings.Join(strings.Fields(w), " ")
}

// builtinWaitWords are words after which an English speaker rarely stops: articles and
// possessives, conjunctions, prepositions, subjects still waiting for their verb, and
// fillers. Words that often end a sentence ("so", "like", "that", "this", "some", "her",
// "it", "on", "in", "up") are left out. Prepositions can end questions ("where are you
// from"), and are kept anyway: a wrong "wait" costs the difference between the long and
// the default hold, a wrong "go" cuts the user off.
var builtinWaitWords = map[string][]string{
	"en": {
		// articles and possessive determiners
		"a", "an", "the", "my", "your", "our", "their", "its",
		// conjunctions
		"and", "but", "or", "nor", "because", "if", "than", "although", "though", "unless", "whether", "while",
		// prepositions
		"to", "of", "for", "with", "from", "by", "about", "into", "onto", "at", "between", "through", "during", "without", "toward", "towards",
		// subjects waiting for their verb
		"i", "we", "they", "he", "she", "i'm", "i'd", "i'll", "we're", "they're", "let's",
		// fillers and hesitations
		"um", "uh", "er", "erm", "uhm", "hmm", "mm", "ah", "eh", "you know", "i mean", "kind of", "sort of",
	},
}
