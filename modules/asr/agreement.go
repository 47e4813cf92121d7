package asr

import (
	"strings"
	"unicode"
)

// LocalAgreement stabilises the successive hypotheses of a growing utterance, after the
// LocalAgreement-n policy of whisper-streaming: a word becomes stable once the last n
// hypotheses agree on it and on every word before it. Stable words are sticky, so one
// odd hypothesis does not make them flicker: they are withdrawn only when all of the last
// n hypotheses contradict them, and then replaced by what those hypotheses agree on.
//
// Words are compared case-insensitively and without surrounding punctuation, so
// "Americans," agrees with "americans". A LocalAgreement is owned by one goroutine.
type LocalAgreement struct {
	n       int
	history [][]HypWord // the last n hypotheses, oldest first
	stable  []HypWord
}

// NewLocalAgreement returns a LocalAgreement over the last n hypotheses (at least 1; 1
// makes every hypothesis stable at once).
func NewLocalAgreement(n int) *LocalAgreement {
	return &LocalAgreement{n: max(n, 1)}
}

// Reset forgets everything, for a new utterance.
func (a *LocalAgreement) Reset() {
	a.history = a.history[:0]
	a.stable = nil
}

// Stable returns the stable words (shared; do not modify).
func (a *LocalAgreement) Stable() []HypWord { return a.stable }

// Update takes the newest hypothesis and returns the stable words and the newest
// hypothesis's unstable rest (empty when it contradicts the stable words), with the
// stability of each rest word: the share of the last n hypotheses that agree with the
// newest one up to that word.
func (a *LocalAgreement) Update(h []HypWord) (stable []HypWord, rest []HypWord, restStability []float32) {
	h = append([]HypWord(nil), h...)
	a.history = append(a.history, h)
	if len(a.history) > a.n {
		a.history = append(a.history[:0], a.history[len(a.history)-a.n:]...)
	}
	if len(a.history) == a.n {
		// Withdraw the stable words that none of the last n hypotheses still supports.
		support := 0
		for _, old := range a.history {
			support = max(support, commonPrefix(a.stable, old))
		}
		a.stable = a.stable[:support]
		// Extend them with what all of the last n hypotheses agree on.
		agreed := len(a.history[0])
		for _, old := range a.history[1:] {
			agreed = min(agreed, commonPrefix(a.history[0], old))
		}
		if agreed > len(a.stable) && commonPrefix(a.stable, h[:agreed]) == len(a.stable) {
			a.stable = append(a.stable, h[len(a.stable):agreed]...)
		}
	}
	// Keep the times and confidences of the newest hypothesis where it agrees: later
	// decodes see more audio and place words better.
	agree := commonPrefix(a.stable, h)
	copy(a.stable[:agree], h[:agree])
	if agree < len(a.stable) {
		return a.stable, nil, nil
	}
	rest = h[len(a.stable):]
	restStability = make([]float32, len(rest))
	for i := range rest {
		idx := len(a.stable) + i
		count := 0
		for _, old := range a.history {
			if commonPrefix(old, h[:idx+1]) > idx {
				count++
			}
		}
		restStability[i] = float32(count) / float32(a.n)
	}
	return a.stable, rest, restStability
}

// commonPrefix returns how many leading words a and b share.
func commonPrefix(a, b []HypWord) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if !SameWord(a[i].Text, b[i].Text) {
			return i
		}
	}
	return n
}

// SameWord reports whether two recognised words are the same word: equal up to case and
// surrounding punctuation.
func SameWord(a, b string) bool { return NormalizeWord(a) == NormalizeWord(b) }

// NormalizeWord lower-cases w and trims punctuation and symbols around it; a word made
// only of punctuation stays as it is (lower-cased).
func NormalizeWord(w string) string {
	t := strings.TrimFunc(w, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) || unicode.IsSpace(r) })
	if t == "" {
		t = strings.TrimSpace(w)
	}
	return strings.ToLower(t)
}
