package voices

import (
	"fmt"
	"strings"
	"unicode"
)

// A sentence's words are its whitespace-separated pieces with the punctuation around
// them left out ("eggs," is the word eggs); a piece of punctuation alone ("...") is no
// word. The punctuation stays in the text the voice speaks, because it is what gives
// the sentence its prosody: a comma after a list item or around a filler makes the
// voice go on rather than end.

// Words returns text's words, lower-case, without their punctuation.
func Words(text string) []string {
	var words []string
	for _, tok := range strings.Fields(text) {
		if w := wordOf(tok); w != "" {
			words = append(words, w)
		}
	}
	return words
}

// wordOf is the word a piece of text holds: lower-case, the punctuation around it left
// out; "" for punctuation alone.
func wordOf(tok string) string {
	return strings.ToLower(strings.TrimFunc(tok, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
}

// PartText returns the text of text's words from to to (counted from 1, both
// included) with their punctuation: the pieces from the from-th word to the to-th,
// and the punctuation alone that follows the to-th before the next word.
func PartText(text string, from, to int) string {
	toks := strings.Fields(text)
	n, first, last := 0, -1, -1
	for i, tok := range toks {
		if wordOf(tok) == "" {
			if last == i-1 && n == to {
				last = i // punctuation that ends the part ("uh ...")
			}
			continue
		}
		n++
		if n == from {
			first = i
		}
		if n == to {
			last = i
		}
	}
	if first < 0 || last < first {
		return ""
	}
	return strings.Join(toks[first:last+1], " ")
}

// checkAlignable reports a word the aligner cannot be given: each must be letters,
// apostrophes and hyphens, as its dictionary spells words (a voice says "2" as "two",
// which the aligner would not find).
func checkAlignable(words []string) error {
	for _, w := range words {
		for _, r := range w {
			if !unicode.IsLetter(r) && r != '\'' && r != '-' {
				return fmt.Errorf("word %q: a sentence cut at its words must be words of letters, ' and - (numbers written out) separated by spaces", w)
			}
		}
	}
	if len(words) == 0 {
		return fmt.Errorf("no words")
	}
	return nil
}

// CutMark marks where a sentence is cut into parts, in a scenario's sentence
// ("i need eggs, | milk, | and some bread").
const CutMark = "|"

// PartWords are the words of one part of a sentence: from the From-th to the To-th,
// counted from 1, both included.
type PartWords struct{ From, To int }

// SplitSentence reads a sentence with its cuts marked (CutMark): its text without the
// marks, as the voice speaks it, and each part's words. Every part must hold a word,
// and every word must be one the aligner can be given.
func SplitSentence(marked string) (string, []PartWords, error) {
	pieces := strings.Split(marked, CutMark)
	var parts []PartWords
	var fields []string
	n := 0
	for i, piece := range pieces {
		words := Words(piece)
		if len(words) == 0 {
			return "", nil, fmt.Errorf("part %d of %q has no words (a %q marks a cut between words)", i+1, marked, CutMark)
		}
		if err := checkAlignable(words); err != nil {
			return "", nil, err
		}
		parts = append(parts, PartWords{From: n + 1, To: n + len(words)})
		n += len(words)
		fields = append(fields, strings.Fields(piece)...)
	}
	return strings.Join(fields, " "), parts, nil
}
