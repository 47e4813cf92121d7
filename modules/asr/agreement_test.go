package asr

import (
	"strings"
	"testing"
)

func hyp(text string) []HypWord {
	var out []HypWord
	for _, w := range strings.Fields(text) {
		out = append(out, HypWord{Text: w})
	}
	return out
}

func texts(ws []HypWord) string { return JoinWords(ws) }

// TestLocalAgreementScripted drives local agreement with scripted hypothesis sequences
// and checks the stable words after every step.
func TestLocalAgreementScripted(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		hyps   []string
		stable []string // after each hypothesis
		rest   []string // the unstable rest after each hypothesis
	}{
		{
			name:   "growth",
			n:      2,
			hyps:   []string{"and", "and so", "and so my", "and so my fellow", "and so my fellow americans"},
			stable: []string{"", "and", "and so", "and so my", "and so my fellow"},
			rest:   []string{"and", "so", "my", "fellow", "americans"},
		},
		{
			name:   "flicker at the tail never reaches the stable words",
			n:      2,
			hyps:   []string{"ask not", "ask not what", "ask not want", "ask not what", "ask not what your", "ask not what your"},
			stable: []string{"", "ask not", "ask not", "ask not", "ask not what", "ask not what your"},
			rest:   []string{"ask not", "what", "want", "what", "your", ""},
		},
		{
			// and agreement needs consecutive hypotheses: the odd one delays "meters".
			name:   "one odd hypothesis does not withdraw stable words",
			n:      2,
			hyps:   []string{"go forward ten", "go forward ten meters", "go for word ten", "go forward ten meters", "go forward ten meters"},
			stable: []string{"", "go forward ten", "go forward ten", "go forward ten", "go forward ten meters"},
			rest:   []string{"go forward ten", "meters", "", "meters", ""},
		},
		{
			name:   "a correction confirmed twice replaces stable words",
			n:      2,
			hyps:   []string{"i scream", "i scream", "ice cream", "ice cream please"},
			stable: []string{"", "i scream", "i scream", "ice cream"},
			rest:   []string{"i scream", "", "", "please"},
		},
		{
			name:   "a shorter hypothesis keeps the stable words",
			n:      2,
			hyps:   []string{"ten meters", "ten meters", "ten", "ten"},
			stable: []string{"", "ten meters", "ten meters", "ten"},
			rest:   []string{"ten meters", "", "", ""},
		},
		{
			name:   "punctuation and case do not break agreement",
			n:      2,
			hyps:   []string{"And so, my", "and so my fellow", "And so my fellow Americans,"},
			stable: []string{"", "and so my", "And so my fellow"},
			rest:   []string{"And so, my", "fellow", "Americans,"},
		},
		{
			name:   "agreement of three",
			n:      3,
			hyps:   []string{"a b", "a b c", "a x c", "a b c", "a b c", "a b c"},
			stable: []string{"", "", "a", "a", "a", "a b c"},
			rest:   []string{"a b", "a b c", "x c", "b c", "b c", ""},
		},
		{
			name:   "agreement of one makes every hypothesis stable",
			n:      1,
			hyps:   []string{"a", "a b", "x"},
			stable: []string{"a", "a b", "x"},
			rest:   []string{"", "", ""},
		},
		{
			name:   "empty hypotheses",
			n:      2,
			hyps:   []string{"", "", "hello", "hello"},
			stable: []string{"", "", "", "hello"},
			rest:   []string{"", "", "hello", ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewLocalAgreement(tc.n)
			for i, h := range tc.hyps {
				stable, rest, stab := a.Update(hyp(h))
				if got := texts(stable); got != tc.stable[i] {
					t.Fatalf("after %q: stable %q, want %q", h, got, tc.stable[i])
				}
				if got := texts(rest); got != tc.rest[i] {
					t.Fatalf("after %q: rest %q, want %q", h, got, tc.rest[i])
				}
				if len(stab) != len(rest) {
					t.Fatalf("%d stabilities for %d rest words", len(stab), len(rest))
				}
				for j, s := range stab {
					if s <= 0 || s >= 1 || j > 0 && s > stab[j-1] {
						t.Fatalf("after %q: rest stabilities %v", h, stab)
					}
				}
			}
		})
	}
}

func TestLocalAgreementTakesNewestTimes(t *testing.T) {
	a := NewLocalAgreement(2)
	a.Update([]HypWord{{Text: "go", End: 100}, {Text: "on", End: 200}})
	stable, _, _ := a.Update([]HypWord{{Text: "go", End: 110}, {Text: "on", End: 230}, {Text: "now", End: 300}})
	if len(stable) != 2 || stable[0].End != 110 || stable[1].End != 230 {
		t.Fatalf("stable %+v", stable)
	}
	a.Reset()
	if s, _, _ := a.Update(hyp("x")); len(s) != 0 {
		t.Fatalf("stable %v right after Reset", s)
	}
}

func TestNormalizeWord(t *testing.T) {
	for in, want := range map[string]string{
		"Americans,": "americans", "\"Hello!\"": "hello", "don't": "don't", "...": "...", " X ": "x", "": "",
	} {
		if got := NormalizeWord(in); got != want {
			t.Errorf("NormalizeWord(%q) = %q, want %q", in, got, want)
		}
	}
}
