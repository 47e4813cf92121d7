package turntaking

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
)

// step is one scripted event (or a Tick when tick is set) at ms milliseconds, and the
// actions it must produce, written compactly (see describe).
type step struct {
	ms   int
	ev   Event
	tick bool
	want []string
}

var t0 = time.Unix(1000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func speechStart(ms int) Event { return Event{SpeechStart: &SpeechStart{Onset: at(ms)}} }
func candidate(ms int) Event   { return Event{Candidate: &Candidate{Onset: at(ms)}} }
func dropped() Event           { return Event{CandidateDropped: &CandidateDropped{}} }
func speechEnd(ms int) Event   { return Event{SpeechEnd: &SpeechEnd{End: at(ms)}} }
func words(w ...string) Event  { return Event{Words: &Words{Words: w}} }
func heard(w ...string) Event  { return Event{Words: &Words{Words: w, All: w}} }
func paused(ms int) Event      { return Event{SpeechPause: &SpeechPause{End: at(ms)}} }
func utterance(s string) Event { return Event{Utterance: &Utterance{Text: s}} }
func reply(turn int, text string, interrupted bool) Event {
	return Event{Reply: &Reply{TurnID: turn, Text: text, Interrupted: interrupted}}
}
func queued(turn int, last bool) Event {
	return Event{AudioQueued: &AudioQueued{TurnID: turn, Last: last}}
}
func audible(turn int, on bool) Event { return Event{Audio: &AudioHeard{TurnID: turn, Playing: on}} }
func finished(turn int) Event         { return Event{Audio: &AudioHeard{TurnID: turn, Finished: true}} }
func stopped(turn int) Event          { return Event{Audio: &AudioHeard{TurnID: turn, Stopped: true}} }

// describe renders the actions that matter to the policy (state changes are checked
// separately) as short strings.
func describe(acts []Action) []string {
	var out []string
	for _, a := range acts {
		switch {
		case a.Command != nil:
			switch c := a.Command; c.Action {
			case control.Respond:
				out = append(out, fmt.Sprintf("respond %d", c.TurnID))
			case control.Pause:
				out = append(out, fmt.Sprintf("pause %d", c.TurnID))
			case control.Resume:
				out = append(out, fmt.Sprintf("resume %d", c.TurnID))
			case control.Interrupt:
				if c.UserKeptTurn {
					out = append(out, fmt.Sprintf("interrupt %d, the user's turn", c.TurnID))
					break
				}
				out = append(out, fmt.Sprintf("interrupt %d", c.TurnID))
			case control.Prepare:
				out = append(out, fmt.Sprintf("prepare %d %q", c.TurnID, c.Text))
			case control.Withdraw:
				out = append(out, fmt.Sprintf("withdraw %d", c.TurnID))
			}
		case a.User != nil:
			out = append(out, fmt.Sprintf("user %d %q", a.User.TurnID, a.User.Text))
		case a.CloseAgent != nil:
			kind := "agent"
			if a.CloseAgent.Interrupted {
				kind = "agent-cut"
			}
			out = append(out, fmt.Sprintf("%s %d %q", kind, a.CloseAgent.TurnID, a.CloseAgent.Text))
		case a.Say != nil:
			out = append(out, fmt.Sprintf("say %d %q", a.Say.TurnID, a.Say.Text))
		}
	}
	return out
}

// userTurn is the event sequence of a user turn from onset to the committed utterance.
func userTurn(startMs, endMs int, text string, want ...string) []step {
	return []step{
		{ms: startMs, ev: speechStart(startMs)},
		{ms: endMs, ev: speechEnd(endMs)},
		{ms: endMs + 700, ev: Event{EndOfTurn: &EndOfTurn{SpeechEnd: at(endMs)}}},
		{ms: endMs + 750, ev: utterance(text), want: want},
	}
}

// agentSpeaks is a whole, uninterrupted agent turn: reply, audio, finished.
func agentSpeaks(turn, ms int, text string, want ...string) []step {
	return []step{
		{ms: ms, ev: queued(turn, false)},
		{ms: ms + 10, ev: audible(turn, true)},
		{ms: ms + 20, ev: reply(turn, text, false)},
		{ms: ms + 30, ev: queued(turn, true)},
		{ms: ms + 2000, ev: finished(turn), want: want},
	}
}

func concat(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// speakingAgent is a first exchange that leaves agent turn 2 audible at 2000 ms.
func speakingAgent() []step {
	return concat(
		userTurn(0, 1000, "tell me a story", `user 1 "tell me a story"`, "respond 2"),
		[]step{
			{ms: 1900, ev: queued(2, false)},
			{ms: 2000, ev: audible(2, true)},
		},
	)
}

func TestPolicy(t *testing.T) {
	tests := []struct {
		name  string
		cfg   func(*Config)
		steps []step
		final State
	}{
		{
			name: "two user turns get two replies",
			steps: concat(
				userTurn(0, 1000, "hello", `user 1 "hello"`, "respond 2"),
				agentSpeaks(2, 2000, "Hi there.", `agent 2 "Hi there."`),
				userTurn(5000, 6000, "how are you", `user 3 "how are you"`, "respond 4"),
				agentSpeaks(4, 7000, "Fine.", `agent 4 "Fine."`),
			),
			final: SilenceAfterAgent,
		},
		{
			name: "a reply is prepared at the user's pause, withdrawn when the speech resumes, and confirmed by the turn's end",
			cfg:  func(c *Config) { c.Prepare.After = 100 * time.Millisecond },
			steps: []step{
				{ms: 0, ev: speechStart(0)},
				{ms: 800, ev: heard("turn", "on")},
				{ms: 1000, ev: paused(900), want: []string{`prepare 2 "turn on"`}},
				{ms: 1050, ev: Event{SpeechResume: &SpeechResume{}}, want: []string{"withdraw 2"}},
				{ms: 1500, ev: heard("turn", "on", "the", "lamp")},
				{ms: 1650, ev: paused(1600)},
				{ms: 1700, tick: true, want: []string{`prepare 2 "turn on the lamp"`}},
				{ms: 1760, ev: speechEnd(1600)},
				{ms: 1900, ev: Event{EndOfTurn: &EndOfTurn{SpeechEnd: at(1600)}}},
				{ms: 1950, ev: utterance("turn on the lamp"), want: []string{`user 1 "turn on the lamp"`, "respond 2"}},
			},
			final: SilenceAfterUser,
		},
		{
			name: "a recogniser whose words lag the audio: the reply is prepared at the pause and again for the words that reach it",
			cfg:  func(c *Config) { c.Prepare.After = 50 * time.Millisecond },
			steps: []step{
				{ms: 0, ev: speechStart(0)},
				{ms: 800, ev: heard("turn", "on")},
				{ms: 960, ev: paused(900), want: []string{`prepare 2 "turn on"`}},
				{ms: 1150, ev: heard("turn", "on", "the", "lamp"), want: []string{"withdraw 2", `prepare 2 "turn on the lamp"`}},
				{ms: 1160, ev: speechEnd(900)},
				{ms: 1200, ev: Event{EndOfTurn: &EndOfTurn{SpeechEnd: at(900)}}},
				{ms: 1210, ev: utterance("turn on the lamp"), want: []string{`user 1 "turn on the lamp"`, "respond 2"}},
			},
			final: SilenceAfterUser,
		},
		{
			name: "real barge-in interrupts and the user's turn follows the cut agent turn",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(2950), want: []string{"pause 2"}},
				{ms: 3150, ev: words("wait", "please")},
				{ms: 3200, tick: true, want: []string{"interrupt 2"}},
				{ms: 3210, ev: stopped(2)},
				{ms: 3220, ev: reply(2, "Once upon a time there was a dragon.", true), want: []string{`agent-cut 2 "Once upon a time there was a dragon."`}},
				{ms: 3900, ev: speechEnd(3900)},
				{ms: 4700, ev: utterance("wait stop please"), want: []string{`user 3 "wait stop please"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "the user's utterance waits for the interrupted turn to close",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3100, ev: words("no", "stop")},
				{ms: 3250, tick: true, want: []string{"interrupt 2"}},
				{ms: 3400, ev: speechEnd(3400)},
				{ms: 4200, ev: utterance("no stop")},
				{ms: 4300, ev: reply(2, "Once upon a time.", true)},
				{ms: 4310, ev: stopped(2), want: []string{`agent-cut 2 "Once upon a time."`, `user 3 "no stop"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "a backchannel pauses, resumes and is not a turn",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3200, ev: words("mm-hmm")},
				{ms: 3400, ev: speechEnd(3400)},
				{ms: 4100, tick: true},
				{ms: 4150, ev: utterance("Mm-hmm."), want: []string{"resume 2"}},
				{ms: 4200, ev: reply(2, "Once upon a time.", false)},
				{ms: 4210, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			name: "a multi-word backchannel is a backchannel",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3300, ev: words("I", "see")},
				{ms: 3500, ev: speechEnd(3500)},
				{ms: 4250, ev: utterance("i see"), want: []string{"resume 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a cough without words is a false barge-in",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3100, ev: speechEnd(3100)},
				{ms: 3800, tick: true},
				{ms: 4000, ev: utterance(""), want: []string{"resume 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "late words within the grace period still interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3300, ev: speechEnd(3300)},
				{ms: 3500, ev: words("stop", "it"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a word too short does not interrupt; its turn follows the agent's",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3100, ev: words("no")},
				{ms: 3150, ev: speechEnd(3150)},
				{ms: 3850, tick: true},
				{ms: 3900, ev: utterance("no"), want: []string{"resume 2"}},
				{ms: 4000, ev: reply(2, "Once upon a time.", false)},
				{ms: 4010, ev: queued(2, true)},
				{ms: 5000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `user 3 "no"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "possible speech pauses the agent at once; noise lets it go on",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: candidate(3000), want: []string{"pause 2"}},
				{ms: 3100, ev: dropped(), want: []string{"resume 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a confirmed candidate goes on as a barge-in without pausing twice",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: candidate(2990), want: []string{"pause 2"}},
				{ms: 3260, ev: speechStart(2990)},
				{ms: 3300, ev: words("wait", "please"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a candidate while nobody speaks changes nothing",
			steps: concat(
				[]step{{ms: 0, ev: candidate(0)}, {ms: 100, ev: dropped()}},
				userTurn(500, 1500, "hello", `user 1 "hello"`, "respond 2"),
			),
			final: SilenceAfterUser,
		},
		{
			name: "one partial word does not decide; the final transcript does",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3300, ev: words("yet")},
				{ms: 3400, ev: speechEnd(3400)},
				{ms: 4100, ev: utterance("yeah"), want: []string{"resume 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "without a transcript, the grace period ends a false barge-in",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3100, ev: speechEnd(3100)},
				{ms: 5099, tick: true},
				{ms: 5100, tick: true, want: []string{"resume 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "speech too long for a backchannel interrupts without words",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3250, tick: true},
				{ms: 3600, ev: words("mm-hmm")},
				{ms: 3999, tick: true},
				{ms: 4000, tick: true, want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a real word in the final transcript interrupts",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3400, ev: speechEnd(3400)},
				{ms: 4300, ev: utterance("stop"), want: []string{"interrupt 2"}},
				{ms: 4310, ev: stopped(2)},
				{ms: 4320, ev: reply(2, "Once upon a time.", true), want: []string{`agent-cut 2 "Once upon a time."`, `user 3 "stop"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "duration alone interrupts when no words are required",
			cfg:  func(c *Config) { c.BargeIn.MinWords = 0 },
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3249, tick: true},
				{ms: 3250, tick: true, want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "with barge-in off the agent keeps talking and answers afterwards",
			cfg:  func(c *Config) { c.BargeIn.Enabled = false },
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000)},
				{ms: 3100, ev: words("stop", "it")},
				{ms: 3500, ev: speechEnd(3500)},
				{ms: 4250, ev: utterance("stop it")},
				{ms: 4300, ev: reply(2, "Once upon a time.", false)},
				{ms: 4310, ev: queued(2, true)},
				{ms: 5000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `user 3 "stop it"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "the user going on before any audio drops the premature reply",
			steps: concat(
				userTurn(0, 1000, "I would like", `user 1 "I would like"`, "respond 2"),
				[]step{
					{ms: 1800, ev: speechStart(1800), want: []string{"pause 2"}},
					{ms: 2000, ev: words("a", "pizza")},
					{ms: 2050, tick: true, want: []string{"interrupt 2"}},
					{ms: 2060, ev: reply(2, "Sure", true), want: []string{`agent-cut 2 "Sure"`}},
					{ms: 2500, ev: speechEnd(2500)},
					{ms: 3300, ev: utterance("a pizza"), want: []string{`user 3 "a pizza"`, "respond 4"}},
				},
			),
			final: SilenceAfterUser,
		},
		{
			name:  "noise is not a turn",
			steps: userTurn(0, 300, "  "),
			final: Idle,
		},
		{
			name: "an empty reply closes the turn at once",
			steps: concat(
				userTurn(0, 1000, "hello", `user 1 "hello"`, "respond 2"),
				[]step{{ms: 1900, ev: reply(2, "", false), want: []string{`agent 2 ""`}}},
			),
			final: SilenceAfterAgent,
		},
		{
			name: "re-engagement after a long silence, once",
			cfg: func(c *Config) {
				c.Reengage = ReengageConfig{After: 5 * time.Second, Text: "Are you still there?", Max: 1}
			},
			steps: concat(
				userTurn(0, 1000, "hello", `user 1 "hello"`, "respond 2"),
				agentSpeaks(2, 2000, "Hi.", `agent 2 "Hi."`),
				[]step{
					{ms: 8999, tick: true},
					{ms: 9000, tick: true, want: []string{`say 3 "Are you still there?"`}},
					{ms: 9100, ev: queued(3, true)},
					{ms: 9200, ev: audible(3, true)},
					{ms: 10500, ev: finished(3), want: []string{`agent 3 "Are you still there?"`}},
					{ms: 30000, tick: true},
				},
			),
			final: SilenceAfterAgent,
		},
		{
			// smooth-07 of the evaluation: pocketsphinx heard nothing in espeak-ng
			// en-gb-scotland's "can you tell me a story", lowered and sped up.
			name: "a question the recogniser found no words in is asked for again; a cough is not",
			steps: []step{
				{ms: 0, ev: speechStart(0)},
				{ms: 300, ev: speechEnd(300)},
				{ms: 1000, ev: Event{EndOfTurn: &EndOfTurn{SpeechEnd: at(300)}}},
				{ms: 1050, ev: spanUtterance(0, 300, "")},
				{ms: 5000, ev: speechStart(5000)},
				{ms: 5960, ev: speechEnd(5960)},
				{ms: 6460, ev: Event{EndOfTurn: &EndOfTurn{SpeechEnd: at(5960)}}},
				{ms: 6470, ev: spanUtterance(5000, 5960, ""), want: []string{`say 1 "Sorry, I didn't catch that."`}},
				{ms: 6600, ev: queued(1, true)},
				{ms: 6700, ev: audible(1, true)},
				{ms: 8000, ev: finished(1), want: []string{`agent 1 "Sorry, I didn't catch that."`}},
			},
			final: SilenceAfterAgent,
		},
		{
			name: "speech without words over the agent is not asked for again, though the agent finished before its transcript came",
			steps: concat(speakingAgent(), []step{
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3850, ev: speechEnd(3850)},
				{ms: 3900, ev: reply(2, "Once upon a time.", false)},
				{ms: 3910, ev: queued(2, true)},
				{ms: 4000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`}},
				{ms: 4600, ev: spanUtterance(3000, 3850, "")},
			}),
			final: SilenceAfterAgent,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pausing() // these scenarios hold the voice by pausing it; bargein_test.go ducks
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			policy := New(cfg, dialogue.AlignOptions{})
			for i, s := range tt.steps {
				var acts []Action
				if s.tick {
					acts = policy.Tick(at(s.ms))
				} else {
					s.ev.At = at(s.ms)
					acts = policy.Handle(s.ev)
				}
				got := describe(acts)
				if strings.Join(got, "; ") != strings.Join(s.want, "; ") {
					t.Fatalf("step %d at %d ms: actions %q, want %q", i, s.ms, got, s.want)
				}
			}
			if policy.State() != tt.final {
				t.Errorf("final state %v, want %v", policy.State(), tt.final)
			}
		})
	}
}

func TestDeadlines(t *testing.T) {
	policy := New(DefaultConfig(), dialogue.AlignOptions{})
	var acts []Action
	for _, s := range speakingAgent() {
		s.ev.At = at(s.ms)
		acts = policy.Handle(s.ev)
	}
	_ = acts
	if !policy.Deadline().IsZero() {
		t.Fatalf("deadline %v with nothing pending", policy.Deadline())
	}
	policy.Handle(Event{At: at(3000), SpeechStart: &SpeechStart{Onset: at(2980)}})
	if got, want := policy.Deadline(), at(2980+250); !got.Equal(want) {
		t.Fatalf("while the user speaks the deadline is the minimum duration: %v, want %v", got, want)
	}
	policy.Handle(Event{At: at(3240), Words: &Words{Words: []string{"mm-hmm"}}})
	policy.Tick(at(3230))
	if got, want := policy.Deadline(), at(2980+1000); !got.Equal(want) {
		t.Fatalf("after the minimum duration the deadline is the longest backchannel: %v, want %v", got, want)
	}
	policy.Handle(Event{At: at(3300), SpeechEnd: &SpeechEnd{End: at(3300)}})
	if got, want := policy.Deadline(), at(3300+2000); !got.Equal(want) {
		t.Fatalf("after the user stopped the deadline is the grace period: %v, want %v", got, want)
	}
}

func TestStatesFollowTheConversation(t *testing.T) {
	policy := New(DefaultConfig(), dialogue.AlignOptions{})
	var states []string
	record := func(acts []Action) {
		for _, a := range acts {
			if a.State != nil {
				states = append(states, a.State.To.String())
			}
		}
	}
	for _, s := range concat(speakingAgent(), []step{
		{ms: 3000, ev: speechStart(3000)},
		{ms: 3100, ev: words("stop")},
		{ms: 3300, tick: true},
	}) {
		if s.tick {
			record(policy.Tick(at(s.ms)))
			continue
		}
		s.ev.At = at(s.ms)
		record(policy.Handle(s.ev))
	}
	want := "user speaking, silence after user, agent speaking, overlap"
	if got := strings.Join(states, ", "); got != want {
		t.Errorf("states %q, want %q", got, want)
	}
}

func TestNormalizeWord(t *testing.T) {
	for in, want := range map[string]string{"Mm-hmm,": "mm-hmm", "OKAY!": "okay", "  right.": "right", "...": "", "don't": "don't"} {
		if got := normalizeWord(in); got != want {
			t.Errorf("normalizeWord(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCloseAgentKeepsWhatWasHeard: the agent turn's one record turns the speaker's
// reports into what the history keeps: the word the latest report put the listener in,
// the reply's clauses, and when the turn was heard.
func TestCloseAgentKeepsWhatWasHeard(t *testing.T) {
	heard := func(turn int, pos time.Duration, playing bool, w *dialogue.Position) Event {
		return Event{Audio: &AudioHeard{TurnID: turn, Playing: playing, Pos: pos, Heard: w}}
	}
	clauses := []string{"Once upon a time,", "there was a dragon."}
	tests := []struct {
		name  string
		steps []step
		want  CloseAgent
	}{
		{
			name: "interrupted in the middle of a word",
			steps: concat(userTurn(0, 1000, "tell me a story", `user 1 "tell me a story"`, "respond 2"), []step{
				{ms: 1900, ev: queued(2, false)},
				{ms: 2000, ev: heard(2, 2*time.Second, true, &dialogue.Position{ClauseID: 0, WordStart: 0, WordEnd: 4, WordFraction: 0.2})},
				{ms: 2500, ev: heard(2, 2500*time.Millisecond, true, &dialogue.Position{ClauseID: 1, WordStart: 6, WordEnd: 9, WordFraction: 0.6})},
				{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}},
				{ms: 3150, ev: words("wait", "please")},
				{ms: 3250, tick: true, want: []string{"interrupt 2"}},
				{ms: 3260, ev: Event{Audio: &AudioHeard{TurnID: 2, Stopped: true, Pos: 3050 * time.Millisecond,
					Heard: &dialogue.Position{ClauseID: 1, WordStart: 10, WordEnd: 13, WordFraction: 0.4}}}},
				{ms: 3270, ev: Event{Reply: &Reply{TurnID: 2, Text: " Once upon a time, there was a dragon. ", Clauses: clauses, Interrupted: true}},
					want: []string{`agent-cut 2 "Once upon a time, there was a dragon."`}},
			}),
			want: CloseAgent{TurnID: 2, InReplyTo: 1, Text: "Once upon a time, there was a dragon.", Interrupted: true,
				Heard: &dialogue.Heard{Position: dialogue.Position{TurnID: 2, ClauseID: 1, WordStart: 10, WordEnd: 13, WordFraction: 0.4}, Clauses: clauses},
				Start: 2 * time.Second, End: 2500 * time.Millisecond},
		},
		{
			name: "interrupted before a word was heard: nothing to keep",
			steps: concat(userTurn(0, 1000, "I would like", `user 1 "I would like"`, "respond 2"), []step{
				{ms: 1800, ev: speechStart(1800), want: []string{"pause 2"}},
				{ms: 2000, ev: words("a", "pizza")},
				{ms: 2050, tick: true, want: []string{"interrupt 2"}},
				{ms: 2060, ev: Event{Reply: &Reply{TurnID: 2, Text: "Sure", Clauses: []string{"Sure"}, Interrupted: true}}, want: []string{`agent-cut 2 "Sure"`}},
			}),
			want: CloseAgent{TurnID: 2, InReplyTo: 1, Text: "Sure", Interrupted: true},
		},
		{
			name: "a re-engagement cut in its fixed text",
			steps: concat(
				userTurn(0, 1000, "hello", `user 1 "hello"`, "respond 2"),
				agentSpeaks(2, 2000, "Hi.", `agent 2 "Hi."`),
				[]step{
					{ms: 9000, tick: true, want: []string{`say 3 "Are you still there?"`}},
					{ms: 9100, ev: queued(3, false)},
					{ms: 9200, ev: heard(3, 9200*time.Millisecond, true, &dialogue.Position{WordStart: 4, WordEnd: 7, WordFraction: 1})},
					// Speech 100 ms after the agent became audible: it yields at once.
					{ms: 9300, ev: speechStart(9300), want: []string{"pause 3", "interrupt 3"}},
					{ms: 9400, ev: words("yes", "I", "am")},
					{ms: 9560, ev: Event{Audio: &AudioHeard{TurnID: 3, Stopped: true, Pos: 9310 * time.Millisecond,
						Heard: &dialogue.Position{WordStart: 8, WordEnd: 13, WordFraction: 0.5}}}, want: []string{`agent-cut 3 "Are you still there?"`}},
				}),
			want: CloseAgent{TurnID: 3, Text: "Are you still there?", Interrupted: true,
				Heard: &dialogue.Heard{Position: dialogue.Position{TurnID: 3, WordStart: 8, WordEnd: 13, WordFraction: 0.5}, Clauses: []string{"Are you still there?"}},
				Start: 9200 * time.Millisecond, End: 9200 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := pausing()
			cfg.Reengage = ReengageConfig{After: 5 * time.Second, Text: "Are you still there?", Max: 1}
			policy := New(cfg, dialogue.AlignOptions{})
			var closed *CloseAgent
			for i, s := range tt.steps {
				var acts []Action
				if s.tick {
					acts = policy.Tick(at(s.ms))
				} else {
					s.ev.At = at(s.ms)
					acts = policy.Handle(s.ev)
				}
				if got := describe(acts); strings.Join(got, "; ") != strings.Join(s.want, "; ") {
					t.Fatalf("step %d at %d ms: actions %q, want %q", i, s.ms, got, s.want)
				}
				for _, a := range acts {
					if a.CloseAgent != nil && a.CloseAgent.TurnID == tt.want.TurnID {
						closed = a.CloseAgent
					}
				}
			}
			if closed == nil {
				t.Fatal("the agent turn was not closed")
			}
			if !reflect.DeepEqual(*closed, tt.want) {
				t.Errorf("closed %+v (heard %+v)\nwant   %+v (heard %+v)", *closed, closed.Heard, tt.want, tt.want.Heard)
			}
		})
	}
}

// TestAgentHeardIsWhatTheHistoryKeeps: while the agent speaks, the policy reports what
// the listener heard as the history would keep it were the turn cut then (half-heard
// words included, punctuation only at a clause's end), and the last report of an
// interrupted turn is what its close has the history store.
func TestAgentHeardIsWhatTheHistoryKeeps(t *testing.T) {
	clauses := []string{"Once upon a time,", "there was a dragon."}
	at2 := func(ms, clause, start, end int, fraction float64) Event {
		return Event{Audio: &AudioHeard{TurnID: 2, Playing: true, Pos: time.Duration(ms) * time.Millisecond,
			Heard: &dialogue.Position{TurnID: 2, ClauseID: clause, Clause: clauses[clause], WordStart: start, WordEnd: end, WordFraction: fraction}}}
	}
	type heardStep struct {
		step
		heard []string // the AgentHeard texts, in order
	}
	steps := []heardStep{
		{step: step{ms: 1900, ev: queued(2, false)}},
		{step: step{ms: 2000, ev: at2(2000, 0, 0, 4, 0.2)}, heard: []string{""}},
		{step: step{ms: 2100, ev: at2(2100, 0, 0, 4, 0.6)}, heard: []string{"Once"}},
		{step: step{ms: 2200, ev: at2(2200, 0, 5, 9, 0.3)}},
		{step: step{ms: 2600, ev: at2(2600, 1, 0, 5, 0.5)}, heard: []string{"Once upon a time, there"}},
		{step: step{ms: 3000, ev: speechStart(3000), want: []string{"pause 2"}}},
		{step: step{ms: 3150, ev: words("wait", "please")}},
		{step: step{ms: 3250, tick: true, want: []string{"interrupt 2"}}},
		{step: step{ms: 3260, ev: Event{Audio: &AudioHeard{TurnID: 2, Stopped: true, Pos: 3050 * time.Millisecond,
			Heard: &dialogue.Position{TurnID: 2, ClauseID: 1, Clause: clauses[1], WordStart: 6, WordEnd: 9, WordFraction: 0.6}}}},
			heard: []string{"Once upon a time, there was"}},
		{step: step{ms: 3270, ev: Event{Reply: &Reply{TurnID: 2, Text: "Once upon a time, there was a dragon.", Clauses: clauses, Interrupted: true}},
			want: []string{`agent-cut 2 "Once upon a time, there was a dragon."`}}},
	}
	policy := New(pausing(), dialogue.AlignOptions{})
	for _, s := range userTurn(0, 1000, "tell me a story", `user 1 "tell me a story"`, "respond 2") {
		s.ev.At = at(s.ms)
		policy.Handle(s.ev)
	}
	var last *AgentHeard
	var closed *CloseAgent
	for i, s := range steps {
		var acts []Action
		if s.tick {
			acts = policy.Tick(at(s.ms))
		} else {
			s.ev.At = at(s.ms)
			acts = policy.Handle(s.ev)
		}
		if got := describe(acts); strings.Join(got, "; ") != strings.Join(s.want, "; ") {
			t.Fatalf("step %d at %d ms: actions %q, want %q", i, s.ms, got, s.want)
		}
		var heard []string
		for _, a := range acts {
			if a.AgentHeard != nil {
				heard = append(heard, a.AgentHeard.Text)
				last = a.AgentHeard
			}
			if a.CloseAgent != nil {
				closed = a.CloseAgent
			}
		}
		if strings.Join(heard, "|") != strings.Join(s.heard, "|") {
			t.Fatalf("step %d at %d ms: heard %q, want %q", i, s.ms, heard, s.heard)
		}
	}
	if last.Start != 2*time.Second || last.TurnID != 2 {
		t.Errorf("heard from %v (turn %d), want 2s (turn 2)", last.Start, last.TurnID)
	}
	if closed == nil || closed.Heard == nil {
		t.Fatalf("closed %+v, want a cut", closed)
	}
	stored, err := dialogue.HeardText(closed.Heard.Clauses, closed.Heard.Position, dialogue.AlignOptions{})
	if err != nil || stored != last.Text {
		t.Errorf("the history keeps %q (%v), the last report said %q", stored, err, last.Text)
	}
}
