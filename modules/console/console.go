// Package console shows a conversation as it happens: the user's words as the
// recogniser hears them (partial words updating in place), the agent's words as the
// listener hears them, and who is speaking. On a terminal it redraws the line in
// progress; otherwise (a pipe or a log) it prints each finished line once.
//
// A finished line is exactly what the dialogue history stored (the manager's agent-turn
// and user-turn IUs): for an interrupted agent turn, the words the listener heard; a
// backchannel the user gave while the agent spoke is marked as one.
package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
)

// Module renders the conversation to a writer.
type Module struct {
	name string
	w    io.Writer
	tty  bool
}

// New returns a console module; tty selects in-place redrawing.
func New(name string, w io.Writer, tty bool) *Module { return &Module{name: name, w: w, tty: tty} }

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// screen is the console's state, owned by the module's goroutine.
type screen struct {
	m      *Module
	origin time.Time
	state  manager.State

	words     asr.WordList // the user's words so far in the utterance in progress
	userStart time.Duration

	// The agent turn being heard, as the speaker reports it (live lines only; the
	// finished line comes from the manager).
	agentTurn  int
	doneTurn   int            // the newest agent turn already printed for good
	agentHeard map[int]string // clause id → text heard so far (whole words)
	agentOrder []int
	agentStart time.Duration
	live       string // the line being redrawn on a terminal
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	s := &screen{m: m, origin: p.Now(), agentHeard: map[int]string{}}
	defer s.flushLive()
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			// An agent turn still under way when the session ended was never stored.
			if s.agentTurn != 0 {
				s.printLine(s.agentLine() + " —(not stored)")
			}
			return nil
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				s.update(p.Now().Sub(s.origin), up)
			}
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
		// (manager.UserTurn): as a turn, as a backchannel, or not at all (noise).
		s.words.Reset()
		s.drawLive("")
	case manager.UserTurn:
		if up.Type != iu.Add {
			return
		}
		if pl.Backchannel {
			s.printLine(fmt.Sprintf("[%6.2fs] you   ~ %s —(backchannel)", pl.Start.Seconds(), pl.Text))
			return
		}
		s.printLine(fmt.Sprintf("[%6.2fs] you   › %s", pl.Start.Seconds(), pl.Text))
	case speaker.Progress:
		s.heard(pl)
	case manager.AgentTurn:
		if up.Type == iu.Add {
			s.agentEnded(pl)
		}
	case manager.TurnState:
		s.state = pl.State
		if s.words.Len() > 0 {
			s.drawLive(s.userLine())
		} else if s.agentTurn != 0 {
			s.drawLive(s.agentLine())
		} else {
			s.drawLive(s.status())
		}
	case llm.Reply:
		if up.Type == iu.Add && pl.Err != "" {
			s.printLine(fmt.Sprintf("[%6.2fs] (the LLM failed: %s)", now.Seconds(), pl.Err))
		}
	}
}

// heard follows the agent's words as the speaker reports them heard.
func (s *screen) heard(pr speaker.Progress) {
	t := pr.Text
	if t == nil || t.TurnID <= s.doneTurn {
		return // audio without text, or late reports about a turn already printed
	}
	if t.TurnID != s.agentTurn {
		s.agentTurn = t.TurnID
		s.agentHeard = map[int]string{}
		s.agentOrder = nil
		s.agentStart = pr.Pos
	}
	if _, seen := s.agentHeard[t.ClauseID]; !seen {
		s.agentOrder = append(s.agentOrder, t.ClauseID)
	}
	// Whole words only: the word in progress shows once it has been heard to its end.
	end := t.Start
	if t.Start == t.End || t.Fraction >= 1 {
		end = t.End
	}
	s.agentHeard[t.ClauseID] = t.Clause[:end]
	if s.words.Len() == 0 {
		s.drawLive(s.agentLine())
	}
}

// agentEnded prints an agent turn for good, as the history stored it.
func (s *screen) agentEnded(a manager.AgentTurn) {
	if a.TurnID == s.agentTurn {
		s.agentTurn = 0
		s.agentHeard = map[int]string{}
		s.agentOrder = nil
	}
	s.doneTurn = max(s.doneTurn, a.TurnID)
	if !a.Stored {
		s.drawLive(s.status())
		return // the listener heard none of it
	}
	suffix := ""
	if a.Interrupted {
		suffix = " —(interrupted)"
	}
	if a.Text != "" || suffix != "" {
		s.printLine(fmt.Sprintf("[%6.2fs] agent › %s%s", a.Start.Seconds(), a.Text, suffix))
	}
}

func (s *screen) status() string {
	switch s.state {
	case manager.UserSpeaking:
		return "● you are speaking"
	case manager.SilenceAfterUser:
		return "● thinking…"
	case manager.AgentSpeaking:
		return "● agent speaking"
	case manager.Overlap:
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

func (s *screen) agentText() string {
	parts := make([]string, 0, len(s.agentOrder))
	for _, id := range s.agentOrder {
		if t := strings.TrimSpace(s.agentHeard[id]); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

func (s *screen) agentLine() string {
	return fmt.Sprintf("[%6.2fs] agent › %s", s.agentStart.Seconds(), s.agentText())
}

// drawLive shows the line in progress (terminals only).
func (s *screen) drawLive(line string) {
	if !s.m.tty || line == s.live {
		return
	}
	s.live = line
	fmt.Fprintf(s.m.w, "\r\x1b[K%s", line)
}

// printLine prints a finished line (above the live line on a terminal).
func (s *screen) printLine(line string) {
	if s.m.tty {
		fmt.Fprintf(s.m.w, "\r\x1b[K%s\n", line)
		s.live = ""
		return
	}
	fmt.Fprintln(s.m.w, line)
}

func (s *screen) flushLive() {
	if s.m.tty && s.live != "" {
		fmt.Fprint(s.m.w, "\r\x1b[K")
	}
}
