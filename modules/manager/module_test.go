package manager

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/turntaking"
)

// sent records what the manager sent, in order, as "type summary" lines, and the
// agent-turn updates themselves.
type sent struct {
	mu     sync.Mutex
	lines  []string
	agents []iu.Update
}

func (s *sent) Observe(_ time.Time, m iu.Message) {
	if m.From != "manager" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, up := range m.Updates {
		switch pl := up.IU.Payload.(type) {
		case AgentTurn:
			s.agents = append(s.agents, up)
			s.lines = append(s.lines, fmt.Sprintf("%s %s", up.Type, pl.Summary()))
		case control.Command, UserTurn:
			if up.Type == iu.Add {
				s.lines = append(s.lines, fmt.Sprintf("%s %s", up.Type, pl.Summary()))
			}
		}
	}
}

// converse runs the manager on the IUs of the other modules, batch by batch, with a
// history store cutting with cut, and returns what it sent and what the history kept.
func converse(t *testing.T, cfg turntaking.Config, cut dialogue.AlignOptions, batches ...iu.Payload) (*sent, *dialogue.History) {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewVirtual(origin)
	defer clk.Close()
	format, err := dialogue.LoadFormat("plain")
	if err != nil {
		t.Fatal(err)
	}
	store, err := dialogue.NewStore(ctx, dialogue.NewHistory(format, "S"), nil, dialogue.StoreConfig{Align: cut})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec := &sent{}
	net := iu.NewNetwork(iu.WithClock(clk), iu.WithObserver(rec))
	feeder := iu.ModuleFunc{ModuleName: "feeder", Fn: func(ctx context.Context, p *iu.Ports) error {
		var segment iu.IU // the open speech segment
		for _, pl := range batches {
			up := []iu.Update{}
			if seg, ok := pl.(vad.Segment); ok && seg.End > 0 {
				segment.Payload = seg
				up = append(up, iu.CommitOf(segment))
			} else {
				u := p.NewIU(pl)
				up = append(up, iu.AddOf(u))
				if _, ok := pl.(vad.Segment); ok {
					segment = u
				}
			}
			if err := p.Send(ctx, up...); err != nil {
				return err
			}
		}
		return nil
	}}
	mgr := New("manager", store, Options{Turns: cfg, Origin: origin})
	if err := net.Add(feeder, mgr); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(feeder, mgr); err != nil {
		t.Fatal(err)
	}
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rec, h
}

// origin is when the session's timeline starts.
var origin = time.Unix(1000, 0)

// clause is agent turn 2's clause 0, which chunk and playing speak.
const clause = "Once upon a time."

func chunk(last bool) tts.Chunk {
	return tts.Chunk{TurnID: 2, ClauseText: clause, LastOfClause: last, LastOfTurn: last,
		Audio: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 441)}}
}

func playing(pos time.Duration, wordStart, wordEnd int, fraction float64) speaker.Progress {
	return speaker.Progress{State: speaker.Playing, Heard: "tts/1", Item: chunk(false), Offset: 100, Length: 441, Pos: pos,
		Text: &dialogue.Position{TurnID: 2, Clause: clause, WordStart: wordStart, WordEnd: wordEnd, WordFraction: fraction}}
}

// aUserTurn is the IUs of the user saying "tell me a story" from 0 to 1 s.
func aUserTurn() []iu.Payload {
	return []iu.Payload{
		vad.Segment{Start: 0},
		vad.Segment{Start: 0, End: time.Second},
		vad.EndOfTurn{SpeechEnd: time.Second},
		asr.Utterance{Text: "tell me a story", Start: 0, End: time.Second},
	}
}

// TestAgentTurnIU: the manager's agent-turn IU is ADDed when the turn is asked for
// (before the Respond), UPDATEd with what the listener heard so far, cut as the history
// cuts, and COMMITted with what the history stored: the whole turn, or for an
// interrupted one exactly the text its last update showed. The history's utterances
// say when they were said and heard.
func TestAgentTurnIU(t *testing.T) {
	tests := []struct {
		name      string
		cut       dialogue.AlignOptions
		agent     []iu.Payload
		want      []string
		wantStore string
		// heard is when the listener heard the agent turn (session timeline).
		heard [2]time.Duration
	}{
		{
			name: "heard to its end",
			agent: []iu.Payload{
				chunk(false),
				playing(2*time.Second, 0, 4, 0.6),
				playing(2100*time.Millisecond, 5, 9, 0.2),
				chunk(true),
				llm.Reply{TurnID: 2, Spoken: clause, Clauses: []string{clause}},
				speaker.Progress{State: speaker.Playing, Heard: "tts/2", Item: chunk(true), Offset: 441, Length: 441, Pos: 3 * time.Second,
					Text: &dialogue.Position{TurnID: 2, Clause: clause, WordStart: len(clause), WordEnd: len(clause)}},
			},
			want: []string{
				`add user turn 1 "tell me a story"`,
				`add turn 2 begins, in reply to 1`,
				`add respond turn 2 (user turn ended)`,
				`update turn 2 heard so far "Once"`,
				`update turn 2 heard so far "Once upon a time."`,
				`commit turn 2 "Once upon a time."`,
			},
			wantStore: "agent 2 " + clause,
			heard:     [2]time.Duration{2 * time.Second, 3 * time.Second},
		},
		{
			name: "interrupted in a word heard half",
			agent: []iu.Payload{
				chunk(false),
				playing(2*time.Second, 0, 4, 1),
				vad.Candidate{Start: 2500 * time.Millisecond},
				overlap.Evidence{Start: 2500 * time.Millisecond, Sound: overlap.Voice, DecodedTo: 240 * time.Millisecond, Decodes: 1,
					Words: []overlap.Word{{Text: "stop", Confidence: 1}}},
				speaker.Progress{State: speaker.Stopped, Heard: "tts/1", Item: chunk(false), Offset: 300, Length: 441, Pos: 2600 * time.Millisecond,
					Text: &dialogue.Position{TurnID: 2, Clause: clause, WordStart: 5, WordEnd: 9, WordFraction: 0.6}},
				llm.Reply{TurnID: 2, Spoken: clause, Clauses: []string{clause}, Interrupted: true},
			},
			want: []string{
				`add user turn 1 "tell me a story"`,
				`add turn 2 begins, in reply to 1`,
				`add respond turn 2 (user turn ended)`,
				`update turn 2 heard so far "Once"`,
				`add duck turn 2 to -12 dB (possible user speech)`,
				`add interrupt turn 2 (barge-in: an interrupt word)`,
				`update turn 2 heard so far "Once upon"`,
				`commit turn 2 cut to "Once upon" (generated "Once upon a time.")`,
			},
			wantStore: "agent 2 Once upon (interrupted)",
			heard:     [2]time.Duration{2 * time.Second, 2 * time.Second},
		},
		{
			name: "interrupted in a word heard half, whole words only",
			cut:  dialogue.AlignOptions{MinWordFraction: 1},
			agent: []iu.Payload{
				chunk(false),
				playing(2*time.Second, 0, 4, 1),
				vad.Candidate{Start: 2500 * time.Millisecond},
				overlap.Evidence{Start: 2500 * time.Millisecond, Sound: overlap.Voice, DecodedTo: 240 * time.Millisecond, Decodes: 1,
					Words: []overlap.Word{{Text: "stop", Confidence: 1}}},
				speaker.Progress{State: speaker.Stopped, Heard: "tts/1", Item: chunk(false), Offset: 300, Length: 441, Pos: 2600 * time.Millisecond,
					Text: &dialogue.Position{TurnID: 2, Clause: clause, WordStart: 5, WordEnd: 9, WordFraction: 0.6}},
				llm.Reply{TurnID: 2, Spoken: clause, Clauses: []string{clause}, Interrupted: true},
			},
			want: []string{
				`add user turn 1 "tell me a story"`,
				`add turn 2 begins, in reply to 1`,
				`add respond turn 2 (user turn ended)`,
				`update turn 2 heard so far "Once"`,
				`add duck turn 2 to -12 dB (possible user speech)`,
				`add interrupt turn 2 (barge-in: an interrupt word)`,
				`commit turn 2 cut to "Once" (generated "Once upon a time.")`,
			},
			wantStore: "agent 2 Once (interrupted)",
			heard:     [2]time.Duration{2 * time.Second, 2 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, h := converse(t, turntaking.DefaultConfig(), tt.cut, append(aUserTurn(), tt.agent...)...)
			if got := strings.Join(rec.lines, "\n"); got != strings.Join(tt.want, "\n") {
				t.Errorf("the manager sent\n%s\nwant\n%s", got, strings.Join(tt.want, "\n"))
			}
			var stored []string
			for _, u := range h.Utterances() {
				line := fmt.Sprintf("%s %d %s", u.Speaker, u.TurnID, u.Text)
				if u.Interrupted {
					line += " (interrupted)"
				}
				stored = append(stored, fmt.Sprintf("%v–%v %s", u.Start.Sub(origin), u.End.Sub(origin), line))
			}
			want := []string{"0s–1s user 1 tell me a story", fmt.Sprintf("%v–%v %s", tt.heard[0], tt.heard[1], tt.wantStore)}
			if strings.Join(stored, "\n") != strings.Join(want, "\n") {
				t.Errorf("the history holds\n%s\nwant\n%s", strings.Join(stored, "\n"), strings.Join(want, "\n"))
			}
			// The last update showed what the commit says was stored.
			var lastOpen, committed AgentTurn
			for _, up := range rec.agents {
				if up.Type == iu.Commit {
					committed = up.IU.Payload.(AgentTurn)
				} else {
					lastOpen = up.IU.Payload.(AgentTurn)
				}
			}
			if committed.Interrupted && lastOpen.Text != committed.Text {
				t.Errorf("the turn showed %q while heard, and the history stored %q", lastOpen.Text, committed.Text)
			}
			if !committed.Closed || !committed.Heard || committed.Start != 2*time.Second {
				t.Errorf("committed %+v, want closed, heard from 2s", committed)
			}
		})
	}
}
