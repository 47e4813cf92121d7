// Package console shows a conversation as it happens: the user's words as the
// recogniser hears them (partial words updating in place), the agent's words as the
// listener hears them, and who is speaking. On a terminal it redraws the line in
// progress; otherwise (a pipe or a log) it prints each finished line once.
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
	"github.com/parley-voice/parley/modules/tts"
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

	words     []wordIU // the user's words so far in the utterance in progress
	userStart time.Duration

	agentTurn  int
	doneTurn   int            // the newest agent turn already printed for good
	agentHeard map[int]string // clause id → text heard so far (whole words)
	agentOrder []int
	agentStart time.Duration
	live       string // the line being redrawn on a terminal
}

type wordIU struct {
	id   iu.ID
	text string
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
			s.finishAgent("")
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
		switch up.Type {
		case iu.Add:
			if len(s.words) == 0 {
				s.userStart = pl.Start
			}
			s.words = append(s.words, wordIU{id: up.IU.ID, text: pl.Text})
		case iu.UpdatePayload:
			for i := range s.words {
				if s.words[i].id == up.IU.ID {
					s.words[i].text = pl.Text
				}
			}
		case iu.Revoke:
			for i := range s.words {
				if s.words[i].id == up.IU.ID {
					s.words = append(s.words[:i], s.words[i+1:]...)
					break
				}
			}
		default:
			return
		}
		s.drawLive(s.userLine(""))
	case asr.Utterance:
		if up.Type != iu.Add {
			return
		}
		s.words = nil
		if strings.TrimSpace(pl.Text) == "" {
			s.drawLive("")
			return
		}
		s.printLine(fmt.Sprintf("[%6.2fs] you   › %s", pl.Start.Seconds(), pl.Text))
	case speaker.Progress:
		c, ok := pl.Item.(tts.Chunk)
		if !ok || c.TurnID <= s.doneTurn {
			return // late reports about a turn already printed
		}
		if c.TurnID != s.agentTurn {
			s.finishAgent("")
			s.agentTurn = c.TurnID
			s.agentHeard = map[int]string{}
			s.agentOrder = nil
			s.agentStart = pl.Pos
		}
		if _, seen := s.agentHeard[c.ClauseID]; !seen {
			s.agentOrder = append(s.agentOrder, c.ClauseID)
		}
		heard := c.ClauseText[:c.CharStart]
		if pl.Finished() || c.WordIndex < 0 {
			heard = c.ClauseText[:c.CharEnd]
		}
		if c.LastOfClause && pl.Finished() {
			heard = c.ClauseText
		}
		s.agentHeard[c.ClauseID] = heard
		switch {
		case pl.State == speaker.Stopped && !pl.Tail:
			s.finishAgent(" —(interrupted)")
		case pl.Finished() && c.LastOfTurn:
			s.finishAgent("")
		default:
			if len(s.words) == 0 {
				s.drawLive(s.agentLine())
			}
		}
	case manager.TurnState:
		s.state = pl.State
		if len(s.words) > 0 {
			s.drawLive(s.userLine(""))
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

func (s *screen) userLine(suffix string) string {
	texts := make([]string, len(s.words))
	for i, w := range s.words {
		texts[i] = w.text
	}
	return fmt.Sprintf("[%6.2fs] you   › %s…%s", s.userStart.Seconds(), strings.Join(texts, " "), suffix)
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

// finishAgent prints the agent's line for good.
func (s *screen) finishAgent(suffix string) {
	if s.agentTurn == 0 {
		return
	}
	if text := s.agentText(); text != "" || suffix != "" {
		s.printLine(fmt.Sprintf("[%6.2fs] agent › %s%s", s.agentStart.Seconds(), text, suffix))
	}
	s.doneTurn = max(s.doneTurn, s.agentTurn)
	s.agentTurn = 0
	s.agentHeard = map[int]string{}
	s.agentOrder = nil
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
