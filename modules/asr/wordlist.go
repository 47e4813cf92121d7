package asr

import "github.com/parley-voice/parley/iu"

// WordList is the recogniser's current words of the utterance in progress, as a
// consumer of the ASR's word IUs keeps them: Apply every update as it arrives, and Reset
// when the Utterance arrives. The zero value is an empty list.
type WordList struct {
	words []listedWord
}

type listedWord struct {
	id   iu.ID
	word Word
}

// Apply applies an ADD, UPDATE, COMMIT or REVOKE of a Word IU: a new word goes to the
// end, an update or commit replaces the word's payload (a committed word has Stability
// 1), a revoke removes it. It reports whether up was such an update; anything else is
// left alone.
func (l *WordList) Apply(up iu.Update) bool {
	w, ok := up.IU.Payload.(Word)
	if !ok {
		return false
	}
	switch up.Type {
	case iu.Add:
		l.words = append(l.words, listedWord{id: up.IU.ID, word: w})
	case iu.UpdatePayload, iu.Commit:
		if up.Type == iu.Commit {
			w.Stability = 1
		}
		for i := range l.words {
			if l.words[i].id == up.IU.ID {
				l.words[i].word = w
			}
		}
	case iu.Revoke:
		for i := range l.words {
			if l.words[i].id == up.IU.ID {
				l.words = append(l.words[:i], l.words[i+1:]...)
				break
			}
		}
	default:
		return false
	}
	return true
}

// Words returns the current words in order.
func (l *WordList) Words() []Word {
	out := make([]Word, len(l.words))
	for i, lw := range l.words {
		out[i] = lw.word
	}
	return out
}

// Len returns the number of current words.
func (l *WordList) Len() int { return len(l.words) }

// Reset forgets every word (the utterance they belong to is over).
func (l *WordList) Reset() { l.words = nil }
