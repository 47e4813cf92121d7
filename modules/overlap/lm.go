package overlap

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/parley-voice/parley/modules/asr"
)

// Vocabulary is what the overlap recogniser can hear. A decode of a sound cut short
// snaps to the nearest word it knows, so the vocabulary is small and holds the words
// that matter at the start of an overlap: the backchannels, the words that open an
// interruption, and common words for the rest.
type Vocabulary struct {
	// Backchannels ("yeah", "mm-hmm", "i see", ...): phrases are split into words.
	Backchannels []string
	// Interrupt are the words that open interruptions ("stop", "wait", "no", ...).
	Interrupt []string
	// Common are other words (DefaultWords when empty).
	Common []string
}

// DefaultWords are common English words for the overlap vocabulary: sentence openers,
// function words and frequent verbs.
var DefaultWords = strings.Fields(`the a an and but or so if then that this these those it its is are was were
be been am do does did done have has had will would can could should may might must not don't can't
won't isn't it's that's i'm you're we're you me my your we us our they them their he him his she her
there here now just only also very really too more most some any all one two other another again
back up down out in on at to of for with about from by into over after before tell say said know
think mean meant want like go going come get got make take give look let please thank thanks well
good great bad time story dragon happened happen next first last different wrong question answer
something nothing anything everything thing little big old new day kind lot much many few
second minute moment bit`)

// boost is how much likelier than a common word a backchannel or interrupt word is.
const boost = 3.0

// phraseMass is the probability a phrase's word gives to the words that follow it in
// the vocabulary's phrases ("hold" → "on", "i" → "see"): a decode of "hold on" then
// prefers it to "old on", whose words the unigrams rank alike. The other words keep
// their unigram probability after it (a backoff weight of 1): a decode cut short after
// "hold", or a phrase's word followed by another word, is not made less likely. The
// model is then not normalised, which a decoder's scores do not need.
const phraseMass = 0.6

// WriteLM writes v as a language model in ARPA format, which pocketsphinx loads as its
// "lm": unigrams, and bigrams for the phrases among the backchannels and interrupt
// words. Words are lowercased and deduplicated; words that cannot be LM tokens (spaces,
// control characters) are left out.
func WriteLM(w io.Writer, v Vocabulary) error {
	common := v.Common
	if len(common) == 0 {
		common = DefaultWords
	}
	weight := map[string]float64{}
	next := map[string][]string{} // a phrase's word → the words that follow it
	var order []string
	// add gives the words of phrases weight wt; with wordsOnly, only the phrases of one
	// word: the words of longer ones ("a" of "wait a second") are favoured only by the
	// bigrams, after the word before them.
	add := func(phrases []string, wt float64, wordsOnly bool) {
		for _, ph := range phrases {
			var prev string
			words := phraseWords(ph)
			for _, word := range words {
				if !validToken(word) {
					prev = ""
					continue
				}
				if _, ok := weight[word]; !ok {
					order = append(order, word)
				}
				w := wt
				if wordsOnly && len(words) > 1 {
					w = 1
				}
				weight[word] = max(weight[word], w)
				if prev != "" && !slices.Contains(next[prev], word) {
					next[prev] = append(next[prev], word)
				}
				prev = word
			}
		}
	}
	add(v.Backchannels, boost, false)
	add(v.Interrupt, boost, true)
	add(common, 1, false)
	if len(order) == 0 {
		return fmt.Errorf("overlap: empty vocabulary")
	}
	var total float64
	for _, wt := range weight {
		total += wt
	}
	bigrams := 0
	for _, ws := range next {
		bigrams += len(ws)
	}
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "\\data\\\nngram 1=%d\n", len(order)+2)
	if bigrams > 0 {
		fmt.Fprintf(b, "ngram 2=%d\n", bigrams)
	}
	fmt.Fprintf(b, "\n\\1-grams:\n")
	fmt.Fprintf(b, "-99.0000 <s>\n")
	fmt.Fprintf(b, "%.4f </s>\n", math.Log10(1/float64(len(order))))
	for _, word := range order {
		if len(next[word]) > 0 {
			fmt.Fprintf(b, "%.4f %s 0.0000\n", math.Log10(weight[word]/total), word)
			continue
		}
		fmt.Fprintf(b, "%.4f %s\n", math.Log10(weight[word]/total), word)
	}
	if bigrams > 0 {
		fmt.Fprintf(b, "\n\\2-grams:\n")
		for _, word := range order {
			for _, n := range next[word] {
				fmt.Fprintf(b, "%.4f %s %s\n", math.Log10(phraseMass/float64(len(next[word]))), word, n)
			}
		}
	}
	fmt.Fprintf(b, "\n\\end\\\n")
	return b.Flush()
}

// phraseWords splits a vocabulary entry into its words as the recogniser spells them:
// lower case, without the punctuation around them ("No, I meant" → no i meant), as the
// manager compares them.
func phraseWords(ph string) []string {
	words := strings.Fields(ph)
	for i, w := range words {
		words[i] = asr.NormalizeWord(w)
	}
	return words
}

func validToken(w string) bool {
	if w == "" || w == "<s>" || w == "</s>" {
		return false
	}
	for _, r := range w {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Truncated pronunciations let a decode name an interrupt word before its last sound
// has been heard ("stop" from "sto"): for each one-word interrupt entry of at least minPhones
// phones, WriteDict adds variants without its last truncate phones (keeping at least
// keepPhones). Shorter truncations ("S T" for "stop") match the starts of backchannels
// ("see") too often.
const (
	minPhones  = 4
	keepPhones = 3
	truncate   = 1
)

// WriteDict writes a pronunciation dictionary for v (pocketsphinx's format, "word PH1
// PH2 ..." with alternates as "word(2) ..."), taking the pronunciations from dict (the
// same format, such as pocketsphinx's cmudict-en-us.dict). Interrupt words get extra,
// truncated pronunciations, so that a decode of a sound cut short can already name them.
// Words dict does not know are left out.
func WriteDict(w io.Writer, v Vocabulary, dict io.Reader) error {
	want := map[string]bool{}
	interrupt := map[string]bool{}
	common := v.Common
	if len(common) == 0 {
		common = DefaultWords
	}
	for _, list := range [][]string{v.Backchannels, v.Interrupt, common} {
		for _, ph := range list {
			for _, word := range phraseWords(ph) {
				want[word] = true
			}
		}
	}
	// Only one-word entries: the words of a phrase ("a", "second" of "wait a second")
	// are common words, which cut short would match too much.
	for _, ph := range v.Interrupt {
		if words := phraseWords(ph); len(words) == 1 {
			interrupt[words[0]] = true
		}
	}
	prons := map[string][][]string{}
	var order []string
	sc := bufio.NewScanner(dict)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		word := f[0]
		if i := strings.IndexByte(word, '('); i > 0 {
			word = word[:i]
		}
		if !want[word] {
			continue
		}
		if _, ok := prons[word]; !ok {
			order = append(order, word)
		}
		prons[word] = append(prons[word], f[1:])
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("overlap: dictionary: %w", err)
	}
	if len(order) == 0 {
		return fmt.Errorf("overlap: the dictionary knows none of the vocabulary")
	}
	b := bufio.NewWriter(w)
	for _, word := range order {
		seen := map[string]bool{}
		var all [][]string
		add := func(p []string) {
			if k := strings.Join(p, " "); !seen[k] {
				seen[k] = true
				all = append(all, p)
			}
		}
		for _, p := range prons[word] {
			add(p)
		}
		if interrupt[word] {
			for _, p := range prons[word] {
				for cut := 1; cut <= truncate && len(p) >= minPhones && len(p)-cut >= keepPhones; cut++ {
					add(p[:len(p)-cut])
				}
			}
		}
		for i, p := range all {
			name := word
			if i > 0 {
				name = fmt.Sprintf("%s(%d)", word, i+1)
			}
			fmt.Fprintf(b, "%s %s\n", name, strings.Join(p, " "))
		}
	}
	return b.Flush()
}
