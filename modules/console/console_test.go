package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/turntaking"
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
	c := New("console", NewTerminal(&out, nil, tty))
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

// heard is a speaker's report that the listener hears turn's text at a position.
func heard(turn, clause int, text string, start, end int, fraction float64, pos time.Duration) step {
	return added(speaker.Progress{State: speaker.Playing, Pos: pos,
		Text: &dialogue.Position{TurnID: turn, ClauseID: clause, Clause: text, WordStart: start, WordEnd: end, WordFraction: fraction}})
}

// agentHeard opens (ADD) or updates the manager's agent-turn IU of turn with what the
// listener heard so far, first heard at start.
func agentHeard(turn int, text string, start time.Duration) step {
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		name := fmt.Sprintf("agent %d", turn)
		rec := manager.AgentTurn{TurnID: turn, Heard: true, Text: text, Start: start}
		u, open := ius[name]
		if !open {
			ius[name] = p.NewIU(rec)
			return []iu.Update{iu.AddOf(ius[name])}
		}
		up := iu.UpdateOf(u, rec)
		ius[name] = up.IU
		return []iu.Update{up}
	}
}

// agentClosed commits the agent-turn IU of rec's turn with what the history stored
// (ADDing it first when it was never heard).
func agentClosed(rec manager.AgentTurn) step {
	rec.Closed = true
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		name := fmt.Sprintf("agent %d", rec.TurnID)
		u, open := ius[name]
		delete(ius, name)
		if !open {
			u = p.NewIU(rec)
			return []iu.Update{iu.AddOf(u), iu.CommitOf(u)}
		}
		u.Payload = rec
		return []iu.Update{iu.CommitOf(u)}
	}
}

// TestConsolePrintsWhatWasStored: the agent's line is what the manager says the history
// stored, whatever was heard of it while it spoke; the speaker's own reports change
// nothing.
func TestConsolePrintsWhatWasStored(t *testing.T) {
	const clause = "Once upon a time, there was a dragon."
	got := run(t, false,
		added(asr.Utterance{Text: "tell me a story", Start: 1190 * time.Millisecond}),
		added(manager.UserTurn{TurnID: 1, Text: "tell me a story", Start: 1190 * time.Millisecond}),
		agentHeard(2, "Once", 3*time.Second),
		added(asr.Utterance{Text: "none of them", Start: 3100 * time.Millisecond}), // a hum: no line
		agentHeard(2, "Once upon a", 3*time.Second),
		agentClosed(manager.AgentTurn{TurnID: 2, InReplyTo: 1, Text: "Once upon a", FullText: clause, Interrupted: true, Stored: true, Start: 3020 * time.Millisecond}),
		added(manager.UserTurn{TurnID: 2, Text: "mm-hmm", Backchannel: true, Sound: turntaking.SoundHum, Start: 3100 * time.Millisecond}),
		added(asr.Utterance{Text: "the", Start: 3300 * time.Millisecond}), // a knock: no line
		added(manager.UserTurn{TurnID: 2, Backchannel: true, Sound: turntaking.SoundNoise, Start: 3300 * time.Millisecond}),
		heard(2, 0, clause, 12, 16, 1, 3600*time.Millisecond), // late: the turn is printed
		added(asr.Utterance{Text: "   "}),
		agentClosed(manager.AgentTurn{TurnID: 4, InReplyTo: 3, FullText: "Sure.", Interrupted: true, Stored: false}),
		agentClosed(manager.AgentTurn{TurnID: 6, InReplyTo: 5, Text: "The end.", FullText: "The end.", Stored: true, Start: 9 * time.Second}),
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
	got := run(t, true,
		word("tell", iu.Add, asr.Word{Text: "tel", Start: 1190 * time.Millisecond}),
		word("tell", iu.UpdatePayload, asr.Word{Text: "tell", Start: 1190 * time.Millisecond}),
		word("me", iu.Add, asr.Word{Text: "me"}),
		word("me", iu.Revoke, asr.Word{Text: "me"}),
		added(asr.Utterance{Text: "tell", Start: 1190 * time.Millisecond}),
		added(manager.UserTurn{TurnID: 1, Text: "tell", Start: 1190 * time.Millisecond}),
		agentHeard(2, "Once", 3*time.Second),
		agentHeard(2, "Once", 3*time.Second),
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

// TestConsoleLinesInTimeOrder: a user who speaks while the agent is talking (a barge-in
// or a backchannel) finishes an utterance before the agent's turn ends; the agent's line,
// which started earlier, must still come first, so that the times shown only go forward.
func TestConsoleLinesInTimeOrder(t *testing.T) {
	const clause = "Once upon a time, there was a dragon."
	for _, tty := range []bool{false, true} {
		got := run(t, tty,
			added(asr.Utterance{Text: "tell me a story", Start: 1190 * time.Millisecond}),
			added(manager.UserTurn{TurnID: 1, Text: "tell me a story", Start: 1190 * time.Millisecond}),
			agentHeard(2, "Once", 2*time.Second),
			word("stop", iu.Add, asr.Word{Text: "stop", Start: 3 * time.Second}),
			agentHeard(2, "Once upon", 2*time.Second),
			// The user's utterance is final while the agent still speaks.
			added(asr.Utterance{Text: "stop", Start: 3 * time.Second}),
			agentHeard(2, "Once upon a", 2*time.Second),
			agentClosed(manager.AgentTurn{TurnID: 2, InReplyTo: 1, Text: "Once upon a", FullText: clause, Interrupted: true, Stored: true, Start: 2 * time.Second}),
			// The manager stores the user's words after the agent turn they cut.
			added(manager.UserTurn{TurnID: 3, Text: "stop", Start: 3 * time.Second}),
			// An agent turn that starts while the user's next words are under way waits
			// for the user's line.
			word("and", iu.Add, asr.Word{Text: "and", Start: 5 * time.Second}),
			agentHeard(4, "Yes.", 6*time.Second),
			agentClosed(manager.AgentTurn{TurnID: 4, InReplyTo: 3, Text: "Yes.", FullText: "Yes.", Stored: true, Start: 6 * time.Second}),
			added(asr.Utterance{Text: "and then", Start: 5 * time.Second}),
			added(manager.UserTurn{TurnID: 5, Text: "and then", Start: 5 * time.Second}),
		)
		var lines []string
		for _, l := range strings.Split(got, "\n") {
			if i := strings.LastIndex(l, "\r\x1b[K"); i >= 0 {
				l = l[i+len("\r\x1b[K"):]
			}
			if l != "" && strings.HasPrefix(l, "[") && !strings.HasSuffix(l, "…") {
				lines = append(lines, l)
			}
		}
		want := []string{
			"[  1.19s] you   › tell me a story",
			"[  2.00s] agent › Once upon a —(interrupted)",
			"[  3.00s] you   › stop",
			"[  5.00s] you   › and then",
			"[  6.00s] agent › Yes.",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("tty %v: printed\n%s\nwant\n%s\n(raw %q)", tty, strings.Join(lines, "\n"), strings.Join(want, "\n"), got)
		}
	}
}

// TestTerminalLogAboveLiveLine: a log line written while a partial line is on the screen
// takes the partial line off, prints in its place, and draws it again after itself.
func TestTerminalLogAboveLiveLine(t *testing.T) {
	var out, logs strings.Builder
	term := NewTerminal(&out, &logs, true)
	term.SetLive("[  1.00s] you   › tell me…")
	if _, err := term.LogWriter().Write([]byte("WARN\tsomething happened\n")); err != nil {
		t.Fatal(err)
	}
	term.Note("a note")
	term.Println("[  1.00s] you   › tell me a story")
	want := "\r\x1b[K[  1.00s] you   › tell me…" + // the partial line
		"\r\x1b[K" + "[  1.00s] you   › tell me…" + // cleared for the log line, drawn again
		"\r\x1b[K" + "a note\n" + "[  1.00s] you   › tell me…" +
		"\r\x1b[K[  1.00s] you   › tell me a story\n"
	if out.String() != want {
		t.Errorf("screen %q\nwant   %q", out.String(), want)
	}
	if logs.String() != "WARN\tsomething happened\n" {
		t.Errorf("log %q", logs.String())
	}
	// Not a terminal: no control characters at all.
	var plain strings.Builder
	term = NewTerminal(&plain, nil, false)
	term.SetLive("partial")
	term.LogWriter().Write([]byte("log\n"))
	term.Println("line")
	term.ClearLive()
	if plain.String() != "log\nline\n" {
		t.Errorf("plain output %q", plain.String())
	}
}

func TestLineOrder(t *testing.T) {
	var o lineOrder
	o.add(3*time.Second, "c")
	o.add(1*time.Second, "a")
	if got := o.release(2 * time.Second); strings.Join(got, ",") != "a" {
		t.Errorf("release before 2s: %q", got)
	}
	o.add(2*time.Second, "b")
	if got := o.release(5*time.Second, 2*time.Second); strings.Join(got, ",") != "b" {
		t.Errorf("release before 2s (and 5s): %q", got)
	}
	if got := o.release(); strings.Join(got, ",") != "c" {
		t.Errorf("release all: %q", got)
	}
	if got := o.release(); got != nil {
		t.Errorf("nothing held, released %q", got)
	}
}
