package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
)

// step makes one batch of updates for the feeder to send; ius holds the IUs by name, so
// that later steps can update or revoke them.
type step func(p *iu.Ports, ius map[string]iu.IU) []iu.Update

// run feeds the console the steps' batches and returns what it printed.
func run(t *testing.T, tty bool, steps ...step) string {
	t.Helper()
	clk := clock.NewVirtual(time.Unix(1000, 0))
	defer clk.Close()
	net := iu.NewNetwork(iu.WithClock(clk))
	feeder := iu.ModuleFunc{ModuleName: "feeder", Fn: func(ctx context.Context, p *iu.Ports) error {
		ius := map[string]iu.IU{}
		for _, st := range steps {
			if err := p.Send(ctx, st(p, ius)...); err != nil {
				return err
			}
		}
		return nil
	}}
	var out strings.Builder
	c := New("console", &out, tty)
	if err := net.Add(feeder, c); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(feeder, c); err != nil {
		t.Fatal(err)
	}
	if err := net.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// added sends a new IU with payload pl (ADD and COMMIT).
func added(pl iu.Payload) step {
	return func(p *iu.Ports, _ map[string]iu.IU) []iu.Update {
		u := p.NewIU(pl)
		return []iu.Update{iu.AddOf(u), iu.CommitOf(u)}
	}
}

// word adds (or, with typ, updates or revokes) the word IU named name.
func word(name string, typ iu.UpdateType, w asr.Word) step {
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		switch typ {
		case iu.Add:
			ius[name] = p.NewIU(w)
			return []iu.Update{iu.AddOf(ius[name])}
		case iu.Revoke:
			return []iu.Update{iu.RevokeOf(ius[name])}
		}
		return []iu.Update{iu.UpdateOf(ius[name], w)}
	}
}

func heard(turn, clause int, text string, start, end int, fraction float64, pos time.Duration) step {
	return added(speaker.Progress{State: speaker.Playing, Pos: pos,
		Text: &speaker.HeardText{TurnID: turn, ClauseID: clause, Clause: text, Start: start, End: end, Fraction: fraction}})
}

// TestConsolePrintsWhatWasStored: the agent's line is what the manager says the history
// stored, whatever the speaker's reports showed while it spoke.
func TestConsolePrintsWhatWasStored(t *testing.T) {
	const clause = "Once upon a time, there was a dragon."
	got := run(t, false,
		added(asr.Utterance{Text: "tell me a story", Start: 1190 * time.Millisecond}),
		added(manager.UserTurn{TurnID: 1, Text: "tell me a story", Start: 1190 * time.Millisecond}),
		heard(2, 0, clause, 0, 4, 1, 3*time.Second),
		added(asr.Utterance{Text: "none of them", Start: 3100 * time.Millisecond}), // a hum: no line
		heard(2, 0, clause, 10, 11, 0.7, 3500*time.Millisecond),
		added(manager.AgentTurn{TurnID: 2, InReplyTo: 1, Text: "Once upon a", FullText: clause, Interrupted: true, Stored: true, Start: 3020 * time.Millisecond}),
		added(manager.UserTurn{TurnID: 2, Text: "mm-hmm", Backchannel: true, Sound: manager.SoundHum, Start: 3100 * time.Millisecond}),
		heard(2, 0, clause, 12, 16, 1, 3600*time.Millisecond), // late: the turn is printed
		added(asr.Utterance{Text: "   "}),
		added(manager.AgentTurn{TurnID: 4, InReplyTo: 3, FullText: "Sure.", Interrupted: true, Stored: false}),
		added(manager.AgentTurn{TurnID: 6, InReplyTo: 5, Text: "The end.", FullText: "The end.", Stored: true, Start: 9 * time.Second}),
	)
	want := "[  1.19s] you   › tell me a story\n" +
		"[  3.02s] agent › Once upon a —(interrupted)\n" +
		"[  3.10s] you   ~ mm-hmm —(backchannel)\n" +
		"[  9.00s] agent › The end.\n"
	if got != want {
		t.Errorf("printed\n%s\nwant\n%s", got, want)
	}
}

// TestConsoleLiveLines: on a terminal the user's words and the agent's heard words are
// redrawn in place; an agent turn the session ended in the middle of is marked as not
// stored.
func TestConsoleLiveLines(t *testing.T) {
	const clause = "Once upon a time."
	got := run(t, true,
		word("tell", iu.Add, asr.Word{Text: "tel", Start: 1190 * time.Millisecond}),
		word("tell", iu.UpdatePayload, asr.Word{Text: "tell", Start: 1190 * time.Millisecond}),
		word("me", iu.Add, asr.Word{Text: "me"}),
		word("me", iu.Revoke, asr.Word{Text: "me"}),
		added(asr.Utterance{Text: "tell", Start: 1190 * time.Millisecond}),
		added(manager.UserTurn{TurnID: 1, Text: "tell", Start: 1190 * time.Millisecond}),
		heard(2, 0, clause, 0, 4, 1, 3*time.Second),
		heard(2, 0, clause, 5, 9, 0.5, 3200*time.Millisecond),
	)
	for _, want := range []string{
		"\r\x1b[K[  1.19s] you   › tel…",
		"\r\x1b[K[  1.19s] you   › tell…",
		"\r\x1b[K[  1.19s] you   › tell me…",
		"\r\x1b[K[  1.19s] you   › tell\n",
		"\r\x1b[K[  3.00s] agent › Once",
		"\r\x1b[K[  3.00s] agent › Once —(not stored)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
}
