package dialogue

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// spanOf returns the byte span of the n-th (0-based) occurrence of word in s, as the TTS
// reports it.
func spanOf(t *testing.T, s, word string, n int) (int, int) {
	t.Helper()
	from := 0
	for {
		i := strings.Index(s[from:], word)
		if i < 0 {
			t.Fatalf("%q not in %q", word, s)
		}
		if n == 0 {
			return from + i, from + i + len(word)
		}
		n--
		from += i + len(word)
	}
}

func TestAlign(t *testing.T) {
	clauses := []string{"Hi! How are you today?", "It costs 3.5 dollars, or 1,000 cents."}
	full := "Hi! How are you today? It costs 3.5 dollars, or 1,000 cents."
	fr := []string{"Ça coûte 3,5 €, très cher !", "Vraiment ?"}
	frFull := "Ça coûte 3,5 €, très cher ! Vraiment ?"
	tests := []struct {
		name     string
		full     string
		clauses  []string
		clause   int
		word     string // the word being spoken, as the TTS spans it ("" = WordStart/End below)
		nth      int
		ws, we   int
		fraction float64
		opts     AlignOptions
		want     string
		complete bool
	}{
		{name: "word heard to its end", full: full, clauses: clauses, clause: 0, word: "you", fraction: 1, want: "Hi! How are you"},
		{name: "word heard past half counts", full: full, clauses: clauses, clause: 0, word: "you", fraction: 0.6, want: "Hi! How are you"},
		{name: "word barely heard does not", full: full, clauses: clauses, clause: 0, word: "you", fraction: 0.3, want: "Hi! How are"},
		{name: "only complete words", full: full, clauses: clauses, clause: 0, word: "you", fraction: 0.9, opts: AlignOptions{MinWordFraction: 1}, want: "Hi! How are"},
		{name: "inner punctuation kept", full: full, clauses: clauses, clause: 0, word: "How", fraction: 1, want: "Hi! How"},
		{name: "last word heard keeps the clause's punctuation", full: full, clauses: clauses, clause: 0, word: "today", fraction: 1, want: "Hi! How are you today?", complete: true},
		{name: "offset at the clause end", full: full, clauses: clauses, clause: 0, ws: 22, we: 22, want: "Hi! How are you today?", complete: true},
		{name: "across the clause boundary: nothing of the next", full: full, clauses: clauses, clause: 1, word: "It", fraction: 0.1, want: "Hi! How are you today?"},
		{name: "across the clause boundary: first word", full: full, clauses: clauses, clause: 1, word: "It", fraction: 1, want: "Hi! How are you today? It"},
		{name: "number spoken in parts is not cut: first part", full: full, clauses: clauses, clause: 1, word: "3", fraction: 1, want: "Hi! How are you today? It costs"},
		{name: "number spoken in parts: last part", full: full, clauses: clauses, clause: 1, word: "5", fraction: 1, want: "Hi! How are you today? It costs 3.5"},
		{name: "whole number", full: full, clauses: clauses, clause: 1, word: "3.5", fraction: 0.5, want: "Hi! How are you today? It costs 3.5"},
		{name: "comma after the last word dropped", full: full, clauses: clauses, clause: 1, word: "dollars", fraction: 1, want: "Hi! How are you today? It costs 3.5 dollars"},
		{name: "thousands separator", full: full, clauses: clauses, clause: 1, word: "1", fraction: 1, want: "Hi! How are you today? It costs 3.5 dollars, or"},
		{name: "thousands whole", full: full, clauses: clauses, clause: 1, word: "1,000", fraction: 1, want: "Hi! How are you today? It costs 3.5 dollars, or 1,000"},
		{name: "mid-word offset", full: full, clauses: clauses, clause: 1, ws: 15, we: 18, fraction: 0, want: "Hi! How are you today? It costs 3.5"},
		{name: "end of utterance", full: full, clauses: clauses, clause: 1, word: "cents", fraction: 1, want: full, complete: true},
		{name: "nothing heard", full: full, clauses: clauses, clause: 0, word: "Hi", fraction: 0.2, want: ""},
		{name: "multi-byte word", full: frFull, clauses: fr, clause: 0, word: "coûte", fraction: 1, want: "Ça coûte"},
		{name: "offsets inside UTF-8 sequences", full: frFull, clauses: fr, clause: 0, ws: 4, we: 6, fraction: 1, want: "Ça"}, // inside "û"
		{name: "decimal comma", full: frFull, clauses: fr, clause: 0, word: "3", fraction: 1, want: "Ça coûte"},
		{name: "currency sign after a space is its own symbol", full: frFull, clauses: fr, clause: 0, word: "€", fraction: 1, want: "Ça coûte 3,5"},
		{name: "accented word", full: frFull, clauses: fr, clause: 0, word: "très", fraction: 0.7, want: "Ça coûte 3,5 €, très"},
		{name: "second clause, multi-byte", full: frFull, clauses: fr, clause: 1, word: "Vraiment", fraction: 1, want: frFull, complete: true},
		{name: "Han characters are words", full: "我很好，谢谢。", clauses: []string{"我很好，", "谢谢。"}, clause: 0, word: "很", fraction: 1, want: "我很"},
		{name: "Han clause heard to its end", full: "我很好，谢谢。", clauses: []string{"我很好，", "谢谢。"}, clause: 0, word: "好", fraction: 1, want: "我很好，", complete: true},
		{name: "percent is part of its number", full: "It is -4 degrees, 50% colder.", clauses: []string{"It is -4 degrees, 50% colder."}, clause: 0, word: "50", fraction: 1, want: "It is -4 degrees"},
		{name: "number with percent heard", full: "It is -4 degrees, 50% colder.", clauses: []string{"It is -4 degrees, 50% colder."}, clause: 0, word: "50%", fraction: 1, want: "It is -4 degrees, 50%"},
		{name: "sign kept with its number", full: "It is -4 degrees.", clauses: []string{"It is -4 degrees."}, clause: 0, word: "4", fraction: 1, want: "It is -4"},
		{name: "contraction", full: "I can't wait.", clauses: []string{"I can't wait."}, clause: 0, word: "can", fraction: 1, want: "I"},
		{name: "clauses with their own white space", full: "Hello,  world. Bye.", clauses: []string{"Hello,", " world. ", "Bye."}, clause: 1, word: "world", fraction: 1, want: "Hello,  world.", complete: true},
		{name: "text past the last clause is ignored", full: "One two. Three fo", clauses: []string{"One two."}, clause: 0, word: "two", fraction: 1, want: "One two.", complete: true},
		{name: "offsets out of range are clamped", full: "One two.", clauses: []string{"One two."}, clause: 0, ws: -5, we: 99, fraction: 1, want: "One two.", complete: true},
		{name: "no clauses: nothing heard", full: "Hello.", clauses: nil, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := Heard{Position: Position{TurnID: 7, ClauseID: tc.clause, WordStart: tc.ws, WordEnd: tc.we, WordFraction: tc.fraction}, Clauses: tc.clauses}
			if tc.word != "" {
				h.WordStart, h.WordEnd = spanOf(t, tc.clauses[tc.clause], tc.word, tc.nth)
			}
			got, err := Align(tc.full, h, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != tc.want {
				t.Errorf("text %q, want %q", got.Text, tc.want)
			}
			if got.ClauseComplete != tc.complete {
				t.Errorf("clause complete %v, want %v", got.ClauseComplete, tc.complete)
			}
			if !strings.HasPrefix(tc.full, got.Text) || strings.TrimRight(tc.full[:got.Cut], " ") != got.Text {
				t.Errorf("cut %d does not match text %q", got.Cut, got.Text)
			}
		})
	}
}

func TestAlignErrors(t *testing.T) {
	tests := []struct {
		name    string
		full    string
		heard   Heard
		wantErr error
	}{
		{"clause text differs", "Hello world.", Heard{Position: Position{ClauseID: 1}, Clauses: []string{"Hello", "there."}}, ErrClauseMismatch},
		{"clauses out of order", "One. Two.", Heard{Clauses: []string{"Two.", "One."}}, ErrClauseMismatch},
		{"clause ends inside a character", "我很好，谢谢。", Heard{Position: Position{ClauseID: 1, WordEnd: 1, WordFraction: 1}, Clauses: []string{"我很好，", "\xe8"}}, ErrClauseMismatch},
		{"clause id past the end", "One.", Heard{Position: Position{ClauseID: 1}, Clauses: []string{"One."}}, ErrBadHeard},
		{"negative clause id", "One.", Heard{Position: Position{ClauseID: -1}, Clauses: []string{"One."}}, ErrBadHeard},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Align(tc.full, tc.heard, AlignOptions{}); !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestWordSpans(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Hi! How are you today ?", []string{"Hi", "How", "are", "you", "today"}},
		{"3.5 and 1,000 and 10:30 and 1/2.", []string{"3.5", "and", "1,000", "and", "10:30", "and", "1/2"}},
		{"well-known can't rock'n'roll", []string{"well-known", "can't", "rock'n'roll"}},
		{"$5, 5€, -3, +4, 7%.", []string{"$5", "5€", "-3", "+4", "7%"}},
		{"end. Next", []string{"end", "Next"}},
		{"a - b", []string{"a", "b"}},
		{"naïve café", []string{"naïve", "café"}},
		{"日本語です", []string{"日", "本", "語", "で", "す"}},
		{"“Quoted”, (paren)", []string{"Quoted", "paren"}},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			var got []string
			for _, w := range wordSpans(tc.text) {
				got = append(got, tc.text[w.start:w.end])
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("words %q, want %q", got, tc.want)
			}
		})
	}
}

func TestJoinClauses(t *testing.T) {
	tests := []struct {
		clauses []string
		want    string
	}{
		{[]string{"Hello,", "world."}, "Hello, world."},
		{[]string{"Hello, ", "world."}, "Hello, world."},
		{[]string{"Hello,", " world."}, "Hello, world."},
		{[]string{"", "a", "", "b"}, "a b"},
		{nil, ""},
	}
	for _, tc := range tests {
		if got := JoinClauses(tc.clauses); got != tc.want {
			t.Errorf("JoinClauses(%q) = %q, want %q", tc.clauses, got, tc.want)
		}
	}
}

func TestHistoryCutInterrupted(t *testing.T) {
	clauses := []string{"Two plus two is four.", "Now, let us try 3.5 plus 1.5 together."}
	full := JoinClauses(clauses)
	h := NewHistory(mustFormat(t, "llama2"), "S", WithInterruptedMark("..."))
	appendAll(t, h,
		Utterance{Speaker: User, Text: "What is two plus two?", TurnID: 1},
		Utterance{Speaker: Agent, Text: full, TurnID: 1},
	)
	ws, we := spanOf(t, clauses[1], "3.5", 0)
	u, _, err := h.CutInterrupted(Heard{Position: Position{TurnID: 1, ClauseID: 1, WordStart: ws, WordEnd: we, WordFraction: 0.2}, Clauses: clauses}, AlignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := Utterance{Speaker: Agent, TurnID: 1, Text: "Two plus two is four. Now, let us try", FullText: full, Interrupted: true}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("stored %+v\nwant   %+v", u, want)
	}
	if got, _ := h.AgentUtterance(1); !reflect.DeepEqual(got, want) {
		t.Fatalf("history has %+v", got)
	}
	if p := h.Prompt(PromptOptions{}); !strings.Contains(p, "Teacher : Two plus two is four. Now, let us try...\n\n") {
		t.Errorf("prompt does not show the cut turn with its mark: %q", p)
	}

	// A later report that heard more starts again from the full text.
	u, _, err = h.CutInterrupted(Heard{Position: Position{TurnID: 1, ClauseID: 1, WordStart: ws, WordEnd: we, WordFraction: 1}, Clauses: clauses}, AlignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Text != "Two plus two is four. Now, let us try 3.5" {
		t.Errorf("second cut %q", u.Text)
	}

	// A turn that was never stored is stored from its clauses.
	u, i, err := h.CutInterrupted(Heard{Position: Position{TurnID: 2, ClauseID: 0, WordStart: 6, WordEnd: 9, WordFraction: 1}, Clauses: []string{"Great job!", "Next one."}}, AlignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Text != "Great job!" || u.FullText != "Great job! Next one." || i != 2 {
		t.Errorf("new turn %+v at %d", u, i)
	}

	if _, _, err := h.CutInterrupted(Heard{Position: Position{TurnID: 1}, Clauses: []string{"Different text."}}, AlignOptions{}); !errors.Is(err, ErrClauseMismatch) {
		t.Errorf("mismatch: %v", err)
	}
}

// TestHeardTextIsWhatTheHistoryKeeps: the text shown for a turn while it plays
// (HeardText) is what cutting it there would store, half-heard words included when
// enough of them was heard, and the cut utterance keeps the times it was heard.
func TestHeardTextIsWhatTheHistoryKeeps(t *testing.T) {
	clauses := []string{"Once upon a time,", "there was a dragon."}
	start, end := time.Unix(100, 0), time.Unix(103, 0)
	for _, tc := range []struct {
		name string
		at   Position
		opts AlignOptions
		want string
	}{
		{"first word under way", Position{ClauseID: 0, WordStart: 0, WordEnd: 4, WordFraction: 0.2}, AlignOptions{}, ""},
		{"half a word is heard", Position{ClauseID: 0, WordStart: 5, WordEnd: 9, WordFraction: 0.5}, AlignOptions{}, "Once upon"},
		{"only whole words", Position{ClauseID: 0, WordStart: 5, WordEnd: 9, WordFraction: 0.5}, AlignOptions{MinWordFraction: 1}, "Once"},
		{"punctuation waits for the clause's end", Position{ClauseID: 1, WordStart: 0, WordEnd: 5, WordFraction: 0.1}, AlignOptions{}, "Once upon a time,"},
		{"a pause after a clause", Position{ClauseID: 0, WordStart: 17, WordEnd: 17}, AlignOptions{}, "Once upon a time,"},
		{"the last word heard", Position{ClauseID: 1, WordStart: 12, WordEnd: 18, WordFraction: 1}, AlignOptions{}, "Once upon a time, there was a dragon."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shown, err := HeardText(clauses, tc.at, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if shown != tc.want {
				t.Errorf("shown %q, want %q", shown, tc.want)
			}
			h := NewHistory(mustFormat(t, "llama2"), "S")
			heard := Heard{Position: tc.at, Clauses: clauses, Start: start, End: end}
			heard.TurnID = 2
			u, _, err := h.CutInterrupted(heard, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if u.Text != shown || !u.Start.Equal(start) || !u.End.Equal(end) {
				t.Errorf("stored %q heard %v–%v, shown %q heard %v–%v", u.Text, u.Start, u.End, shown, start, end)
			}
		})
	}
}

func FuzzAlign(f *testing.F) {
	f.Add("Hi! How are you today? It costs 3.5 dollars.", "Hi! How are you today?|It costs 3.5 dollars.", 1, 9, 12, 0.5)
	f.Add("Ça coûte 3,5 €", "Ça coûte|3,5 €", 0, 4, 6, 1.0)
	f.Add("我很好，谢谢。", "我很好，|谢谢。", 1, 1, 2, 0.9)
	f.Add("a  b", " a |b ", 0, 0, 0, 0.0)
	f.Fuzz(func(t *testing.T, full, joined string, clause, ws, we int, fraction float64) {
		h := Heard{Position: Position{ClauseID: clause, WordStart: ws, WordEnd: we, WordFraction: fraction}, Clauses: strings.Split(joined, "|")}
		got, err := Align(full, h, AlignOptions{})
		if err != nil {
			if !errors.Is(err, ErrClauseMismatch) && !errors.Is(err, ErrBadHeard) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if got.Cut < 0 || got.Cut > len(full) {
			t.Fatalf("cut %d outside %d bytes", got.Cut, len(full))
		}
		if utf8.ValidString(full) && got.Cut < len(full) && !utf8.RuneStart(full[got.Cut]) {
			t.Fatalf("cut %d inside a UTF-8 sequence of %q", got.Cut, full)
		}
		if !strings.HasPrefix(full, got.Text) || len(got.Text) > got.Cut {
			t.Fatalf("text %q is not the heard prefix (cut %d) of %q", got.Text, got.Cut, full)
		}
		if utf8.ValidString(full) && !utf8.ValidString(got.Text) {
			t.Fatalf("invalid UTF-8 %q", got.Text)
		}
		// Never inside a word: inside the clause being heard, the cut is the end of one of
		// its words (or the clause's start or end).
		spans, err := locateClauses(full, h.Clauses)
		if err != nil {
			t.Fatal(err)
		}
		cs := spans[clause]
		if !got.ClauseComplete && got.Cut > cs.fullStart {
			o := got.Cut - cs.fullStart + cs.lead
			ok := false
			for _, w := range wordSpans(h.Clauses[clause]) {
				ok = ok || w.end == o
			}
			if !ok {
				t.Fatalf("cut %d (clause offset %d) is not at a word end of %q", got.Cut, o, h.Clauses[clause])
			}
		}
	})
}
