package dialogue

import (
	"encoding/json"
	"strings"
	"testing"
)

// withBackchannel is a conversation where the user said "mm-hmm" during agent turn 2:
// the backchannel carries the agent turn's id and follows its utterance.
func withBackchannel(t *testing.T, h *History) {
	t.Helper()
	appendAll(t, h,
		Utterance{Speaker: User, Text: "tell me a story", TurnID: 1},
		Utterance{Speaker: Agent, Text: "Once upon a time.", TurnID: 2},
		Utterance{Speaker: User, Text: "mm-hmm", TurnID: 2, Backchannel: true},
		Utterance{Speaker: User, Text: "what next", TurnID: 3},
		Utterance{Speaker: Agent, Text: "A dragon came.", TurnID: 4},
	)
}

func TestBackchannelsInPrompts(t *testing.T) {
	left := NewHistory(mustFormat(t, "plain"), "S")
	withBackchannel(t, left)
	if got, want := left.Prompt(ForTurn(4)), "S\n\nUser: tell me a story\nAssistant: Once upon a time.\nUser: what next\nAssistant:"; got != want {
		t.Errorf("by default the backchannel is left out:\n got %q\nwant %q", got, want)
	}
	shown := NewHistory(mustFormat(t, "plain"), "S", WithBackchannels(true))
	withBackchannel(t, shown)
	if got, want := shown.Prompt(ForTurn(4)), "S\n\nUser: tell me a story\nAssistant: Once upon a time.\nUser: mm-hmm what next\nAssistant:"; got != want {
		t.Errorf("shown, the backchannel opens the user's line after the agent's turn:\n got %q\nwant %q", got, want)
	}
	// A window of one exchange: the backchannel opens no exchange of its own.
	for _, h := range []*History{left, shown} {
		mem, err := WindowMemory(1)
		if err != nil {
			t.Fatal(err)
		}
		view := mem.View(h.utterances, h.selected(ForTurn(4)))
		var texts []string
		for _, i := range view.Keep {
			texts = append(texts, h.utterances[i].Text)
		}
		want := "tell me a story|Once upon a time.|what next"
		if h.backchannels {
			want = "tell me a story|Once upon a time.|mm-hmm|what next"
		}
		if got := strings.Join(texts, "|"); got != want {
			t.Errorf("window memory (show %v) keeps %q, want %q", h.backchannels, got, want)
		}
	}
	if got := summarisable(left.utterances); got != 3 {
		t.Errorf("summarisable up to %d, want 3 (the last user turn, not the backchannel)", got)
	}
}

func TestBackchannelSessionJSON(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "S", WithBackchannels(true))
	withBackchannel(t, h)
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"backchannel":true`) || !strings.Contains(string(data), `"show_backchannels":true`) {
		t.Fatalf("saved history does not mark the backchannel: %s", data)
	}
	if n := strings.Count(string(data), `"backchannel"`); n != 1 {
		t.Errorf("%d utterances carry the backchannel field; only the backchannel should", n)
	}
	var back History
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Prompt(ForTurn(4)) != h.Prompt(ForTurn(4)) || !back.Utterances()[2].Backchannel {
		t.Fatalf("round trip lost the backchannel: %+v", back.Utterances())
	}
	// A session saved before backchannels existed loads as it was.
	old := `{"format":` + string(mustJSON(t, mustFormat(t, "plain"))) + `,"initial_system_prompt":"S","system_prompt":"S","summary_label":"x",` +
		`"utterances":[{"speaker":"user","text":"hi","turn_id":1},{"speaker":"agent","text":"hello","turn_id":2}]}`
	var oldH History
	if err := json.Unmarshal([]byte(old), &oldH); err != nil {
		t.Fatal(err)
	}
	if oldH.ShowsBackchannels() || len(oldH.Utterances()) != 2 || oldH.Utterances()[0].Backchannel {
		t.Errorf("old session: %+v", oldH.Utterances())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
