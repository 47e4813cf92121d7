package llm

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// splitAll pushes pieces into a fresh splitter and returns every clause, the flushed
// one included.
func splitAll(cfg ClauseConfig, pieces ...string) []string {
	s := NewClauseSplitter(cfg)
	var out []string
	for _, p := range pieces {
		out = append(out, s.Push(p)...)
	}
	if rest := s.Flush(); rest != "" {
		out = append(out, rest)
	}
	return out
}

func TestClauseSplitter(t *testing.T) {
	tests := []struct {
		name string
		cfg  ClauseConfig
		text string
		want []string
	}{
		{"abbreviation and decimal", ClauseConfig{}, "Mr. Smith paid 3.5 dollars. He left.",
			[]string{"Mr. Smith paid 3.5 dollars.", "He left."}},
		{"e.g. and commas", ClauseConfig{}, "Use a tool, e.g. a hammer, to fix it.",
			[]string{"Use a tool,", "e.g. a hammer,", "to fix it."}},
		{"Dr. and U.S.", ClauseConfig{}, "Dr. Who went to the U.S. last year. It was fun.",
			[]string{"Dr. Who went to the U.S. last year.", "It was fun."}},
		{"i.e.", ClauseConfig{}, "Pick one, i.e. the red one.",
			[]string{"Pick one,", "i.e. the red one."}},
		{"thousands and decimals", ClauseConfig{}, "It costs 1,000 dollars and 3.14 cents. Cheap.",
			[]string{"It costs 1,000 dollars and 3.14 cents.", "Cheap."}},
		{"decimal comma", ClauseConfig{}, "Es kostet 3,5 Euro, bitte sehr.",
			[]string{"Es kostet 3,5 Euro,", "bitte sehr."}},
		{"time", ClauseConfig{}, "The time is 10:30 now. Hurry up.",
			[]string{"The time is 10:30 now.", "Hurry up."}},
		{"ellipsis", ClauseConfig{}, "I think... we should go now.",
			[]string{"I think...", "we should go now."}},
		{"unicode ellipsis", ClauseConfig{}, "Let me see… The answer is four.",
			[]string{"Let me see…", "The answer is four."}},
		{"interrobang", ClauseConfig{}, "You did what?! No way, my friend!",
			[]string{"You did what?!", "No way,", "my friend!"}},
		{"closing quote", ClauseConfig{}, `He said "stop it." Then he left.`,
			[]string{`He said "stop it."`, "Then he left."}},
		{"curly quotes", ClauseConfig{}, "She said “come here!” And I came.",
			[]string{"She said “come here!”", "And I came."}},
		{"closing bracket", ClauseConfig{}, "(This is it.) Next one please.",
			[]string{"(This is it.)", "Next one please."}},
		{"newline", ClauseConfig{}, "First line here\nSecond line here",
			[]string{"First line here", "Second line here"}},
		{"blank lines", ClauseConfig{}, "One two three.\n\n\nFour five six.",
			[]string{"One two three.", "Four five six."}},
		{"CJK", ClauseConfig{}, "你好吗？我很好。谢谢你！",
			[]string{"你好吗？", "我很好。", "谢谢你！"}},
		{"CJK quotes", ClauseConfig{}, "他说：「好的。」然后走了。",
			[]string{"他说：", "「好的。」", "然后走了。"}},
		{"CJK single character", ClauseConfig{}, "好。我们走吧。",
			[]string{"好。我们走吧。"}},
		{"single word merges", ClauseConfig{}, "Yes. I can do that.",
			[]string{"Yes. I can do that."}},
		{"single word before comma", ClauseConfig{}, "Hi, Bob.",
			[]string{"Hi, Bob."}},
		{"initials", ClauseConfig{}, "J. K. Rowling wrote books. They sold well.",
			[]string{"J. K. Rowling wrote books.", "They sold well."}},
		{"I at sentence end", ClauseConfig{}, "So do I. Then we go.",
			[]string{"So do I.", "Then we go."}},
		{"approx.", ClauseConfig{}, "It was approx. five miles away.",
			[]string{"It was approx. five miles away."}},
		{"lower-case after period", ClauseConfig{}, "I like cats etc. and dogs too.",
			[]string{"I like cats etc. and dogs too."}},
		{"no punctuation", ClauseConfig{}, "hello there friend",
			[]string{"hello there friend"}},
		{"leading and trailing space", ClauseConfig{}, "   The end.   ",
			[]string{"The end."}},
		{"only space", ClauseConfig{}, " \n\t ", nil},
		{"min words 1", ClauseConfig{MinWords: 1}, "Yes. I can.",
			[]string{"Yes.", "I can."}},
		{"max words", ClauseConfig{MaxWords: 4}, "one two three four five six seven",
			[]string{"one two three four", "five six seven"}},
		{"first clause shorter", ClauseConfig{FirstMaxWords: 3, MaxWords: 5}, "one two three four five six seven eight nine",
			[]string{"one two three", "four five six seven eight", "nine"}},
		{"first clause shorter, no other limit", ClauseConfig{FirstMaxWords: 3}, "Yes, I can do that for you. It is done.",
			[]string{"Yes, I can", "do that for you.", "It is done."}},
		{"first clause ends at punctuation first", ClauseConfig{FirstMaxWords: 4}, "It is. Then more words come here",
			[]string{"It is.", "Then more words come here"}},
		{"extra abbreviation", ClauseConfig{Abbreviations: []string{"Inc."}}, "Acme Inc. makes tools. Buy them.",
			[]string{"Acme Inc. makes tools.", "Buy them."}},
		{"URL", ClauseConfig{}, "See example.com/a.html for more. Thanks.",
			[]string{"See example.com/a.html for more.", "Thanks."}},
		{"semicolon", ClauseConfig{}, "I came; I saw it; I left.",
			[]string{"I came;", "I saw it;", "I left."}},
		{"number list", ClauseConfig{}, "1. Buy milk\n2. Buy eggs",
			[]string{"1. Buy milk", "2. Buy eggs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitAll(tc.cfg, tc.text); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("whole text:\n got %q\nwant %q", got, tc.want)
			}
			var runes []string
			for _, r := range tc.text {
				runes = append(runes, string(r))
			}
			if got := splitAll(tc.cfg, runes...); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rune by rune:\n got %q\nwant %q", got, tc.want)
			}
			var bytes []string
			for i := range len(tc.text) {
				bytes = append(bytes, tc.text[i:i+1])
			}
			if got := splitAll(tc.cfg, bytes...); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("byte by byte:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestClauseSplitterStreaming checks when clauses become available: a boundary is
// decided as soon as the following text settles it, not at the end.
func TestClauseSplitterStreaming(t *testing.T) {
	s := NewClauseSplitter(ClauseConfig{})
	steps := []struct {
		piece   string
		want    []string
		pending string
	}{
		{" Once", nil, "Once"},
		{" upon a time", nil, "Once upon a time"},
		{",", nil, "Once upon a time,"}, // could still be "1,000"-like
		{" there", []string{"Once upon a time,"}, "there"},
		{" was Mr", nil, "there was Mr"},
		{".", nil, "there was Mr."},
		{" Tom.", nil, "there was Mr. Tom."},
		{" ", nil, "there was Mr. Tom."}, // the next word decides
		{"He", []string{"there was Mr. Tom."}, "He"},
	}
	for i, st := range steps {
		got := s.Push(st.piece)
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d Push(%q) = %q, want %q", i, st.piece, got, st.want)
		}
		if p := s.Pending(); p != st.pending {
			t.Errorf("step %d Pending = %q, want %q", i, p, st.pending)
		}
	}
	if rest := s.Flush(); rest != "He" {
		t.Errorf("Flush = %q", rest)
	}
	if s.Pending() != "" || s.Flush() != "" {
		t.Error("splitter not reset by Flush")
	}
}

// wordCount counts runs of letters and digits (each CJK character alone). It never
// counts fewer words than the splitter does, which joins "3.5" or "don't" into one.
func wordCount(s string) int {
	n, in := 0, false
	for _, r := range s {
		switch {
		case isIdeograph(r):
			n++
			in = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !in {
				n++
			}
			in = true
		default:
			in = false
		}
	}
	return n
}

func FuzzClauseSplitter(f *testing.F) {
	f.Add("Mr. Smith paid 3.5 dollars. He left.", uint64(1), uint8(0))
	f.Add("你好吗？我很好。「好的。」", uint64(2), uint8(1))
	f.Add("Well... I think?! \"Yes.\" (No.)\n\nOK, 1,000 e.g. U.S. 10:30", uint64(3), uint8(2))
	f.Add("one two three four five six", uint64(4), uint8(3))
	f.Add("a\xffb. c\xe2\x82 d.", uint64(5), uint8(0))
	f.Add("one two three, four five six seven", uint64(6), uint8(27))
	f.Fuzz(func(t *testing.T, text string, seed uint64, mode uint8) {
		if len(text) > 1<<12 {
			return
		}
		cfg := ClauseConfig{MinWords: int(mode % 3), MaxWords: int(mode/3%4) * 3, FirstMaxWords: int(mode / 12 % 3)}
		whole := splitAll(cfg, text)

		// The same text in random pieces (cut anywhere, even inside a character) gives
		// the same clauses.
		rng := rand.New(rand.NewPCG(seed, 7))
		var pieces []string
		for rest := text; rest != ""; {
			n := 1 + rng.IntN(min(len(rest), 12))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		if got := splitAll(cfg, pieces...); !reflect.DeepEqual(got, whole) {
			t.Fatalf("pieces %q gave\n%q\nwhole text gave\n%q", pieces, got, whole)
		}

		// Nothing is lost or added apart from white space at the cuts.
		// (Invalid UTF-8 is only checked for crashes: white space between stray bytes
		// makes the comparison meaningless.)
		if got, want := noSpace(strings.Join(whole, "")), noSpace(text); utf8.ValidString(text) && got != want {
			t.Fatalf("text changed:\n got %q\nwant %q", got, want)
		}
		minWords := max(cfg.MinWords, 1)
		if cfg.MinWords <= 0 {
			minWords = 2
		}
		for i, c := range whole {
			if c == "" || strings.TrimSpace(c) != c {
				t.Fatalf("clause %d %q is empty or untrimmed", i, c)
			}
			if i < len(whole)-1 && utf8.ValidString(c) && wordCount(c) < minWords {
				t.Fatalf("clause %d %q has fewer than %d words", i, c, minWords)
			}
		}
	})
}

func noSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}
