// Package console shows a conversation as it happens: the user's words as the
// recogniser hears them (partial words updating in place), the agent's words as the
// listener hears them, and who is speaking. On a terminal it redraws the line in
// progress; otherwise (a pipe or a log) it prints each finished line once. It draws on a
// Terminal, which it shares with the log, so that log lines land above the line in
// progress instead of in its middle.
//
// Finished lines appear in the order of the times they show: a user's line that started
// while the agent was speaking waits until the agent's turn is printed, and an agent line
// waits for the user's line that was already under way when the agent started.
//
// The agent's line is the manager's agent-turn IU: while the turn plays, what the
// listener heard so far as the history would keep it were the turn cut then; when the
// turn is over, what the history stored. A finished line is exactly what the dialogue
// history stored (the manager's agent-turn and user-turn IUs): for an interrupted agent
// turn, the words the listener heard; a backchannel the user gave while the agent spoke
// is marked as one.
package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/turntaking"
)

// Module renders the conversation on a Terminal.
type Module struct {
	name string
	term *Terminal
}

// New returns a console module drawing on term.
func New(name string, term *Terminal) *Module { return &Module{name: name, term: term} }

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// screen is the console's state, owned by the module's goroutine.
type screen struct {
	m      *Module
	origin time.Time
	state  turntaking.State

	words     asr.WordList // the user's words so far in the utterance in progress
	userStart time.Duration

	// The agent turn being heard (0: none), what of it was heard so far, and when it
	// began to be heard: the manager's open agent-turn IU (live lines only; the finished
	// line is its COMMIT).
	agentTurn  int
	agentText  string
	agentStart time.Duration

	order lineOrder // finished lines waiting for an earlier one still in progress
	// awaiting holds the starts of the user's utterances the manager has not stored yet
	// (its user-turn IU follows).
	awaiting []time.Duration
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	s := &screen{m: m, origin: p.Now()}
	defer m.term.ClearLive()
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			s.release(true)
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			// An agent turn still under way when the session ended was never stored.
			if s.agentTurn != 0 {
				s.finished(s.agentStart, s.agentLine()+" —(not stored)")
				s.agentTurn = 0
			}
			s.release(true)
			return nil
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				s.update(p.Now().Sub(s.origin), up)
			}
			s.release(false)
		}
	}
}

func (s *screen) update(now time.Duration, up iu.Update) {
	switch pl := up.IU.Payload.(type) {
	case asr.Word:
		if up.Type == iu.Add && s.words.Len() == 0 {
			s.userStart = pl.Start
		}
		if s.words.Apply(up) {
			s.drawLive(s.userLine())
		}
	case asr.Utterance:
		if up.Type != iu.Add {
			return
		}
		// The line is printed when the manager says how the history stored it
		// (manager.UserTurn): as a turn, as a backchannel, or not at all (noise). Until
		// then it holds back the lines that come after it.
		s.words.Reset()
		if strings.TrimSpace(pl.Text) != "" {
			s.awaiting = append(s.awaiting, pl.Start)
		}
		s.drawLive("")
	case manager.UserTurn:
		if up.Type != iu.Add {
			return
		}
		if i := slices.Index(s.awaiting, pl.Start); i >= 0 {
			s.awaiting = slices.Delete(s.awaiting, i, i+1)
		}
		switch {
		case pl.Text == "":
		case pl.Backchannel:
			s.finished(pl.Start, fmt.Sprintf("[%6.2fs] you   ~ %s —(backchannel)", pl.Start.Seconds(), pl.Text))
		default:
			s.finished(pl.Start, fmt.Sprintf("[%6.2fs] you   › %s", pl.Start.Seconds(), pl.Text))
		}
	case manager.AgentTurn:
		switch up.Type {
		case iu.Add, iu.UpdatePayload:
			s.agentHeard(pl)
		case iu.Commit:
			s.agentEnded(pl)
		}
	case manager.TurnState:
		s.state = pl.State
		s.redraw()
	case llm.Reply:
		if up.Type == iu.Add && pl.Err != "" {
			s.finished(now, fmt.Sprintf("[%6.2fs] (the LLM failed: %s)", now.Seconds(), pl.Err))
		}
	}
}

// agentHeard follows the agent's turn as the listener hears it.
func (s *screen) agentHeard(a manager.AgentTurn) {
	if !a.Heard {
		return // asked for, not heard yet
	}
	if a.TurnID != s.agentTurn {
		s.agentTurn = a.TurnID
		s.agentStart = a.Start
	}
	s.agentText = a.Text
	if s.words.Len() == 0 {
		s.drawLive(s.agentLine())
	}
}

// agentEnded prints an agent turn for good, as the history stored it.
func (s *screen) agentEnded(a manager.AgentTurn) {
	if a.TurnID == s.agentTurn {
		s.agentTurn = 0
		s.agentText = ""
	}
	if !a.Stored {
		s.drawLive(s.status())
		return // the listener heard none of it
	}
	suffix := ""
	if a.Interrupted {
		suffix = " —(interrupted)"
	}
	if a.Text != "" || suffix != "" {
		s.finished(a.Start, fmt.Sprintf("[%6.2fs] agent › %s%s", a.Start.Seconds(), a.Text, suffix))
	}
}

// finished queues a finished line that shows time at; release prints it in order.
func (s *screen) finished(at time.Duration, line string) { s.order.add(at, line) }

// release prints the finished lines that no line still in progress precedes (all of
// them at the end of the session), then draws the line in progress again.
func (s *screen) release(all bool) {
	var pending []time.Duration
	if !all {
		pending = append(pending, s.awaiting...)
		if s.words.Len() > 0 {
			pending = append(pending, s.userStart)
		}
		if s.agentTurn != 0 {
			pending = append(pending, s.agentStart)
		}
	}
	lines := s.order.release(pending...)
	for _, l := range lines {
		s.m.term.Println(l)
	}
	if len(lines) > 0 && !all {
		s.redraw()
	}
}

// redraw draws the line in progress: the user's words, else the agent's, else who speaks.
func (s *screen) redraw() {
	switch {
	case s.words.Len() > 0:
		s.drawLive(s.userLine())
	case s.agentTurn != 0:
		s.drawLive(s.agentLine())
	default:
		s.drawLive(s.status())
	}
}

func (s *screen) status() string {
	switch s.state {
	case turntaking.UserSpeaking:
		return "● you are speaking"
	case turntaking.SilenceAfterUser:
		return "● thinking…"
	case turntaking.AgentSpeaking:
		return "● agent speaking"
	case turntaking.Overlap:
		return "● both speaking"
	default:
		return "● listening"
	}
}

func (s *screen) userLine() string {
	var texts []string
	for _, w := range s.words.Words() {
		texts = append(texts, w.Text)
	}
	return fmt.Sprintf("[%6.2fs] you   › %s…", s.userStart.Seconds(), strings.Join(texts, " "))
}

func (s *screen) agentLine() string {
	return fmt.Sprintf("[%6.2fs] agent › %s", s.agentStart.Seconds(), s.agentText)
}

// drawLive shows the line in progress (terminals only).
func (s *screen) drawLive(line string) { s.m.term.SetLive(line) }
