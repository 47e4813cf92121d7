package dialogue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// wordTokenizer counts one token per white-space separated word plus one for BOS. It
// stands in for a real tokenizer in the pure-Go tests; llama_test.go fits prompts with
// the real stories260K and 32k-vocabulary tokenizers.
type wordTokenizer struct{}

func (wordTokenizer) CountTokens(s string) (int, error) { return len(strings.Fields(s)) + 1, nil }

func mustFormat(t testing.TB, name string) Format {
	t.Helper()
	f, err := LoadFormat(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func appendAll(t testing.TB, h *History, utts ...Utterance) {
	t.Helper()
	for _, u := range utts {
		if _, err := h.Append(u); err != nil {
			t.Fatal(err)
		}
	}
}

// conversation returns n exchanges "u<i>"/"a<i>" with turn ids i.
func conversation(n int) []Utterance {
	var out []Utterance
	for i := 1; i <= n; i++ {
		out = append(out,
			Utterance{Speaker: User, Text: fmt.Sprintf("u%d", i), TurnID: i},
			Utterance{Speaker: Agent, Text: fmt.Sprintf("a%d", i), TurnID: i})
	}
	return out
}

func TestAppendOrder(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "")
	appendAll(t, h,
		Utterance{Speaker: User, Text: "one", TurnID: 1},
		Utterance{Speaker: User, Text: "three", TurnID: 3},
	)
	// The agent's interrupted reply to turn 1 arrives after the user's next words.
	i, err := h.Append(Utterance{Speaker: Agent, Text: "two", TurnID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if i != 1 {
		t.Errorf("inserted at %d, want 1", i)
	}
	var texts []string
	for _, u := range h.Utterances() {
		texts = append(texts, u.Text)
	}
	if got := strings.Join(texts, " "); got != "one two three" {
		t.Errorf("order %q", got)
	}
	for _, bad := range []Utterance{{Speaker: 0, Text: "x"}, {Speaker: 9}, {Speaker: User, TurnID: -1}} {
		if _, err := h.Append(bad); !errors.Is(err, ErrInvalidUtterance) {
			t.Errorf("%+v: error %v", bad, err)
		}
	}
}

func TestPromptSelection(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "S")
	appendAll(t, h, conversation(3)...)
	other := "Other"
	tests := []struct {
		name string
		opts PromptOptions
		want string
	}{
		{"everything", PromptOptions{}, "S\n\nUser: u1\nAssistant: a1\nUser: u2\nAssistant: a2\nUser: u3\nAssistant: a3\nAssistant:"},
		{"reply to turn 3 leaves out the earlier attempt", ForTurn(3), "S\n\nUser: u1\nAssistant: a1\nUser: u2\nAssistant: a2\nUser: u3\nAssistant:"},
		{"range", PromptOptions{FromTurn: 2, ToTurn: 2}, "S\n\nUser: u2\nAssistant: a2\nAssistant:"},
		{"other system prompt", PromptOptions{FromTurn: 3, System: &other}, "Other\n\nUser: u3\nAssistant: a3\nAssistant:"},
		{"summary joins the system block", PromptOptions{FromTurn: 3, Summary: "They said hi."},
			"S\n\n" + DefaultSummaryLabel + "\nThey said hi.\n\nUser: u3\nAssistant: a3\nAssistant:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.Prompt(tc.opts); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSystemPrompt(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "first")
	if prev := h.SetSystemPrompt("second"); prev != "first" {
		t.Errorf("previous %q", prev)
	}
	if prev := h.SetSystemPrompt("third"); prev != "second" {
		t.Errorf("previous %q", prev)
	}
	if prev := h.ResetSystemPrompt(); prev != "third" {
		t.Errorf("previous %q", prev)
	}
	if h.SystemPrompt() != "first" || h.InitialSystemPrompt() != "first" {
		t.Errorf("after reset %q", h.SystemPrompt())
	}
}

func TestInterruptedMarkAndEmptyTurns(t *testing.T) {
	tests := []struct {
		name, mark, want string
	}{
		{"no mark", "", "User: q\nAssistant: I was say\nUser: wait\nAssistant:"},
		{"ellipsis", "...", "User: q\nAssistant: I was say...\nAssistant: ...\nUser: wait\nAssistant:"},
		{"note", " (interrupted)", "User: q\nAssistant: I was say (interrupted)\nAssistant: (interrupted)\nUser: wait\nAssistant:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(mustFormat(t, "plain"), "", WithInterruptedMark(tc.mark))
			appendAll(t, h,
				Utterance{Speaker: User, Text: "q", TurnID: 1},
				Utterance{Speaker: Agent, Text: "I was say", TurnID: 1, Interrupted: true},
				Utterance{Speaker: Agent, Text: "", TurnID: 2, Interrupted: true}, // cut before a word was heard
				Utterance{Speaker: User, Text: "   ", TurnID: 3},                  // nothing recognised
				Utterance{Speaker: User, Text: "wait", TurnID: 3},
			)
			if got := h.Prompt(PromptOptions{}); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCloneIsIndependent(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "S")
	appendAll(t, h, conversation(1)...)
	c := h.Clone()
	appendAll(t, c, Utterance{Speaker: User, Text: "more", TurnID: 2})
	c.SetSystemPrompt("T")
	if h.Len() != 2 || h.SystemPrompt() != "S" {
		t.Fatal("clone shares state with the original")
	}
}

func TestHistoryJSONRoundTrip(t *testing.T) {
	h := NewHistory(mustFormat(t, "chatml"), "S", WithInterruptedMark("..."))
	appendAll(t, h, conversation(2)...)
	h.SetSystemPrompt("T")
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h, &back) {
		t.Fatalf("round trip:\n%+v\n%+v", h, &back)
	}
	if back.Prompt(PromptOptions{}) != h.Prompt(PromptOptions{}) {
		t.Fatal("prompts differ after a round trip")
	}
	bad := strings.Replace(string(data), `"turn_id":2`, `"turn_id":0`, 1)
	if err := json.Unmarshal([]byte(bad), &back); !errors.Is(err, ErrInvalidUtterance) {
		t.Errorf("decreasing turn ids: %v", err)
	}
}

func TestFitPromptWordTokenizer(t *testing.T) {
	ctx := context.Background()
	h := NewHistory(mustFormat(t, "plain"), "Be kind.")
	appendAll(t, h, conversation(10)...)
	appendAll(t, h, Utterance{Speaker: User, Text: "last question", TurnID: 11})
	full, err := h.FitPrompt(ctx, wordTokenizer{}, 1000, ForTurn(11))
	if err != nil {
		t.Fatal(err)
	}
	if full.Dropped != 0 || full.Utterances != 21 {
		t.Fatalf("large budget dropped %d of %d", full.Dropped, full.Utterances)
	}
	tests := []struct {
		budget      int
		wantDropped int
	}{
		// "Be kind." + 2 tokens per line + "last question" + cue + BOS.
		{full.Tokens, 0},
		{full.Tokens - 1, 2}, // dropping u1 alone would start at a1: the whole exchange goes
		{full.Tokens - 4, 2},
		{full.Tokens - 5, 4},
		{2 + 3 + 1 + 1, 20}, // only the system prompt, the question and the cue
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.budget), func(t *testing.T) {
			fp, err := h.FitPrompt(ctx, wordTokenizer{}, tc.budget, ForTurn(11))
			if err != nil {
				t.Fatal(err)
			}
			if fp.Dropped != tc.wantDropped {
				t.Errorf("dropped %d, want %d", fp.Dropped, tc.wantDropped)
			}
			if fp.Tokens > tc.budget {
				t.Errorf("%d tokens over budget %d", fp.Tokens, tc.budget)
			}
			if n, _ := (wordTokenizer{}).CountTokens(fp.Text); n != fp.Tokens {
				t.Errorf("reported %d tokens, text has %d", fp.Tokens, n)
			}
			if !strings.HasPrefix(fp.Text, "Be kind.\n\n") || !strings.HasSuffix(fp.Text, "User: last question\nAssistant:") {
				t.Errorf("system prompt or question lost: %q", fp.Text)
			}
			if fp.Dropped < 20 && !strings.HasPrefix(fp.Text, "Be kind.\n\nUser:") {
				t.Errorf("fitted prompt does not start with a user turn: %q", fp.Text)
			}
		})
	}
	if _, err := h.FitPrompt(ctx, wordTokenizer{}, 3, ForTurn(11)); !errors.Is(err, ErrContextTooSmall) {
		t.Errorf("tiny budget: %v", err)
	}
	if h.Len() != 21 {
		t.Errorf("fitting changed the stored history: %d utterances", h.Len())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.FitPrompt(cancelled, wordTokenizer{}, 10, ForTurn(11)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
