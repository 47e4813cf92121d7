package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

// HistoryStore is what the manager needs of the shared dialogue history
// (dialogue.Store implements it).
type HistoryStore interface {
	AppendUtterance(ctx context.Context, u dialogue.Utterance) error
	CutInterrupted(ctx context.Context, heard dialogue.Heard) (dialogue.Utterance, error)
}

// Options configure the manager module.
type Options struct {
	Turns Config
	// EndTimeout is the longest the manager waits after the stream ended for a reply to
	// finish; default 120 s.
	EndTimeout time.Duration
	// EndOfTurnFrom, when set, names the only module whose end-of-turn IUs (and end of
	// the stream, passed on after them) the manager follows: another end-of-turn
	// policy than the VAD's own silence.
	EndOfTurnFrom string
}

// TurnState is the payload of the manager's state IUs (kind "turn-state"): who is
// speaking, for consoles and timelines.
type TurnState struct {
	State     State
	AgentTurn int
	Reason    string
}

// Kind implements iu.Payload.
func (TurnState) Kind() string { return "turn-state" }

// Summary implements iu.Payload.
func (s TurnState) Summary() string {
	if s.AgentTurn > 0 {
		return fmt.Sprintf("%s (agent turn %d)", s.State, s.AgentTurn)
	}
	return s.State.String()
}

// AgentTurn is the payload of the manager's agent-turn IUs (kind "agent-turn", ADD and
// COMMIT in one batch): an agent turn is over, and this is what the history keeps of
// it. Consoles print it, so that they show exactly the stored cut; LatencyObserver
// closes the exchange's figures on it.
type AgentTurn struct {
	TurnID int
	// InReplyTo is the user turn the agent answered (0 for a re-engagement).
	InReplyTo int
	// Text is what the history stored: the whole turn, or for an interrupted one only
	// what the listener heard of it.
	Text string
	// FullText is the whole turn as the agent generated it (or the fixed text it said).
	FullText    string
	Interrupted bool
	// Stored is false for an interrupted turn the listener heard none of, and for a
	// turn with nothing to say (the LLM failed before any text): for the listener it
	// never happened, and the history has no trace of it.
	Stored bool
	// Start and End are when the listener heard the turn (session timeline).
	Start, End time.Duration
}

// Kind implements iu.Payload.
func (AgentTurn) Kind() string { return "agent-turn" }

// Summary implements iu.Payload.
func (a AgentTurn) Summary() string {
	switch {
	case !a.Stored && a.FullText == "":
		return fmt.Sprintf("turn %d empty, not stored", a.TurnID)
	case !a.Stored:
		return fmt.Sprintf("turn %d unheard, not stored (generated %q)", a.TurnID, ellipsis.Cut(a.FullText, 60))
	case a.Interrupted:
		return fmt.Sprintf("turn %d cut to %q (generated %q)", a.TurnID, ellipsis.Cut(a.Text, 60), ellipsis.Cut(a.FullText, 60))
	}
	return fmt.Sprintf("turn %d %q", a.TurnID, ellipsis.Cut(a.Text, 60))
}

// Entry is one line of the conversation as it was said and heard.
type Entry struct {
	Speaker dialogue.Speaker
	TurnID  int
	// Text is what was stored in the history: for an interrupted agent turn, only what
	// the listener heard.
	Text string
	// FullText is what the agent generated, for interrupted turns.
	FullText    string
	Interrupted bool
	// Backchannel marks a user's backchannel (not a turn; TurnID is the agent turn it
	// accompanied).
	Backchannel bool
	// Start and End are times on the session's timeline (since the session started):
	// the user's speech, or the agent's audio from first to last heard.
	Start, End time.Duration
}

// Module is the dialogue manager as a network module. Its producers are the VAD (which
// also passes on the end of a recorded stream), the ASR, the LLM, the TTS and the
// speaker; its consumers are the LLM, the TTS and the speaker (control commands), and
// anything that shows the conversation (state and agent-turn IUs).
type Module struct {
	name  string
	store HistoryStore
	opts  Options

	// Written by the module's goroutine only; read it after the network returned.
	transcript []Entry
}

// New returns a manager that keeps the conversation in store.
func New(name string, store HistoryStore, opts Options) *Module {
	if opts.EndTimeout <= 0 {
		opts.EndTimeout = 120 * time.Second
	}
	return &Module{name: name, store: store, opts: opts}
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Transcript returns the conversation; call it after the network's Run returned.
func (m *Module) Transcript() []Entry { return m.transcript }

// conversation is the state of one Run beyond the state machine, owned by the module's
// goroutine: the IU side of things.
type conversation struct {
	m      *Module
	p      *iu.Ports
	log    *zap.Logger
	origin time.Time
	turns  *Turns

	words       asr.WordList // the user's words in the utterance in progress
	wordsDirty  bool         // words changed in the batch being handled
	userOpen    bool         // a user turn began (speech) and its utterance has not arrived yet
	eotPending  bool         // an end of turn arrived and its utterance has not yet
	streamEnded bool
	endBy       time.Time
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	c := &conversation{m: m, p: p, log: p.Logger(), origin: p.Now(), turns: NewTurns(m.opts.Turns)}
	for {
		deadline := c.turns.Deadline()
		if !c.endBy.IsZero() && (deadline.IsZero() || c.endBy.Before(deadline)) {
			deadline = c.endBy
		}
		ev, err := p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			return nil
		case iu.EventDeadline:
			if err := c.do(ctx, c.turns.Tick(p.Now())); err != nil {
				return err
			}
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if err := c.update(ctx, up); err != nil {
					return err
				}
			}
			// A batch of word updates is one change of the hypothesis (the recogniser
			// revokes and adds words together): the state machine sees it whole.
			if err := c.wordsChanged(ctx); err != nil {
				return err
			}
		}
		if c.finished() {
			return nil
		}
	}
}

// finished reports whether a replay is over: the stream ended, nobody speaks, and the
// agent has nothing left to say.
func (c *conversation) finished() bool {
	if !c.streamEnded {
		return false
	}
	now := c.p.Now()
	if !c.endBy.IsZero() && !now.Before(c.endBy) {
		c.log.Warn("ending the session although the conversation is not over", zap.Stringer("state", c.turns.State()))
		return true
	}
	quiet := !c.userOpen && !c.eotPending && c.turns.AgentTurn() == 0 &&
		(c.turns.State() == Idle || c.turns.State() == SilenceAfterAgent)
	return quiet
}

func (c *conversation) at(d time.Duration) time.Time { return c.origin.Add(d) }

// handle gives the state machine an event at the current time and carries out its
// actions.
func (c *conversation) handle(ctx context.Context, ev Event) error {
	ev.At = c.p.Now()
	return c.do(ctx, c.turns.Handle(ev))
}

func (c *conversation) update(ctx context.Context, up iu.Update) error {
	u := up.IU
	switch pl := u.Payload.(type) {
	case vad.Candidate:
		switch up.Type {
		case iu.Add:
			return c.handle(ctx, Event{Candidate: &Candidate{Onset: c.at(pl.Start)}})
		case iu.Revoke:
			return c.handle(ctx, Event{CandidateDropped: &CandidateDropped{}})
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			c.userOpen = true
			return c.handle(ctx, Event{SpeechStart: &SpeechStart{Onset: c.at(pl.Start)}})
		case iu.Commit:
			return c.handle(ctx, Event{SpeechEnd: &SpeechEnd{End: c.at(pl.End)}})
		}
	case vad.Pause:
		switch up.Type {
		case iu.Add:
			return c.handle(ctx, Event{SpeechPause: &SpeechPause{End: c.at(pl.End)}})
		case iu.Revoke:
			return c.handle(ctx, Event{SpeechResume: &SpeechResume{}})
		}
	case vad.EndOfTurn:
		if from := c.m.opts.EndOfTurnFrom; up.Type == iu.Add && (from == "" || u.ID.Creator() == from) {
			c.eotPending = true
			return c.handle(ctx, Event{EndOfTurn: &EndOfTurn{SpeechEnd: c.at(pl.SpeechEnd)}})
		}
	case asr.Word:
		c.wordsDirty = c.words.Apply(up) || c.wordsDirty
	case asr.Utterance:
		if up.Type != iu.Add {
			return nil
		}
		// The words committed with it come first.
		if err := c.wordsChanged(ctx); err != nil {
			return err
		}
		c.words.Reset()
		c.userOpen, c.eotPending = false, false
		words := make([]ScoredWord, len(pl.Words))
		for i, w := range pl.Words {
			words[i] = ScoredWord{Text: w.Text, Confidence: w.Confidence}
		}
		return c.handle(ctx, Event{Utterance: &Utterance{Text: pl.Text, Words: words, Start: pl.Start, End: pl.End}})
	case overlap.Evidence:
		if up.Type == iu.Revoke {
			return nil
		}
		return c.handle(ctx, Event{Sound: c.sound(pl, up.Type == iu.Commit)})
	case llm.Reply:
		if up.Type != iu.Add || pl.Withdrawn {
			return nil
		}
		var err error
		if pl.Err != "" {
			err = errors.New(pl.Err)
			if pl.TurnID == c.turns.AgentTurn() {
				c.log.Warn("the LLM failed during the reply", zap.Int("turn", pl.TurnID), zap.String("error", pl.Err))
			}
		}
		return c.handle(ctx, Event{Reply: &Reply{TurnID: pl.TurnID, Text: pl.Spoken, Clauses: pl.Clauses, Interrupted: pl.Interrupted, Err: err}})
	case tts.Chunk:
		if up.Type == iu.Add {
			return c.handle(ctx, Event{AudioQueued: &AudioQueued{TurnID: pl.TurnID, Last: pl.LastOfTurn}})
		}
	case speaker.Progress:
		return c.progress(ctx, pl)
	case audio.EndOfStream:
		// Passed on by the VAD (or the end-of-turn policy) after its last segment and
		// end of turn.
		if from := c.m.opts.EndOfTurnFrom; up.Type == iu.Add && (from == "" || u.ID.Creator() == from) {
			c.streamEnded = true
			c.endBy = c.p.Now().Add(c.m.opts.EndTimeout)
		}
	}
	return nil
}

// wordsChanged tells the state machine the recogniser's new hypothesis, if it changed.
func (c *conversation) wordsChanged(ctx context.Context) error {
	if !c.wordsDirty {
		return nil
	}
	c.wordsDirty = false
	// Flickering partial words must not decide a barge-in; only those the recogniser
	// has settled on count.
	var texts, all []string
	for _, w := range c.words.Words() {
		all = append(all, w.Text)
		if w.Stability >= c.m.opts.Turns.BargeIn.MinStability {
			texts = append(texts, w.Text)
		}
	}
	return c.handle(ctx, Event{Words: &Words{Words: texts, All: all}})
}

// sound turns the overlap module's evidence into an event.
func (c *conversation) sound(e overlap.Evidence, final bool) *OverlapSound {
	s := &OverlapSound{Onset: c.at(e.Start), DecodedTo: e.DecodedTo, Decodes: e.Decodes, Ended: e.Ended, Dropped: e.Dropped, Final: final}
	switch e.Sound {
	case overlap.Noise:
		s.Kind = SoundNoise
	case overlap.Hum:
		s.Kind = SoundHum
	case overlap.Voice:
		s.Kind = SoundVoice
	}
	if e.Ended {
		s.End = c.at(e.End)
	}
	for _, w := range e.Words {
		s.Words = append(s.Words, ScoredWord{Text: w.Text, Confidence: w.Confidence})
	}
	return s
}

// progress turns the speaker's report about agent audio into an event.
func (c *conversation) progress(ctx context.Context, pr speaker.Progress) error {
	chunk, ok := pr.Item.(tts.Chunk)
	if !ok {
		return nil
	}
	stop := pr.State == speaker.Paused || pr.State == speaker.Stopped
	h := &AudioHeard{
		TurnID:   chunk.TurnID,
		Playing:  pr.State == speaker.Playing,
		Tail:     pr.Tail && stop,
		Finished: pr.Finished() && chunk.LastOfTurn && pr.Heard != "",
		Stopped:  pr.State == speaker.Stopped && !pr.Tail,
		Pos:      pr.Pos,
	}
	if pr.Finished() && chunk.LastOfClause && pr.Heard != "" {
		h.ClausesHeard = chunk.ClauseID + 1
	}
	if t := pr.Text; t != nil {
		h.Heard = &HeardWord{ClauseID: t.ClauseID, Start: t.WordStart, End: t.WordEnd, Fraction: t.WordFraction}
	}
	return c.handle(ctx, Event{Audio: h})
}

// do carries out the state machine's actions in order.
func (c *conversation) do(ctx context.Context, acts []Action) error {
	for _, act := range acts {
		if err := c.act(ctx, act); err != nil {
			return err
		}
	}
	return nil
}

func (c *conversation) send(ctx context.Context, p iu.Payload) error {
	u := c.p.NewIU(p)
	return c.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

func (c *conversation) act(ctx context.Context, act Action) error {
	switch {
	case act.Respond != nil:
		c.log.Info("reply requested", zap.Int("turn", act.Respond.TurnID), zap.String("reason", act.Respond.Reason))
		return c.send(ctx, control.Command{Action: control.Respond, TurnID: act.Respond.TurnID, Reason: act.Respond.Reason})
	case act.Pause != nil:
		c.log.Info("pausing the agent", zap.Int("turn", act.Pause.TurnID), zap.String("reason", act.Pause.Reason))
		return c.send(ctx, control.Command{Action: control.Pause, TurnID: act.Pause.TurnID, Reason: act.Pause.Reason})
	case act.Resume != nil:
		c.log.Info("resuming the agent", zap.Int("turn", act.Resume.TurnID), zap.String("reason", act.Resume.Reason))
		return c.send(ctx, control.Command{Action: control.Resume, TurnID: act.Resume.TurnID, Reason: act.Resume.Reason})
	case act.Interrupt != nil:
		c.log.Info("interrupting the agent", zap.Int("turn", act.Interrupt.TurnID), zap.String("reason", act.Interrupt.Reason))
		return c.send(ctx, control.Command{Action: control.Interrupt, TurnID: act.Interrupt.TurnID, Reason: act.Interrupt.Reason})
	case act.Prepare != nil:
		c.log.Debug("preparing a reply", zap.Int("turn", act.Prepare.TurnID), zap.String("for", act.Prepare.Text))
		return c.send(ctx, control.Command{Action: control.Prepare, TurnID: act.Prepare.TurnID, Text: act.Prepare.Text, Reason: "the user paused"})
	case act.Withdraw != nil:
		c.log.Debug("withdrawing the prepared reply", zap.Int("turn", act.Withdraw.TurnID), zap.String("reason", act.Withdraw.Reason))
		return c.send(ctx, control.Command{Action: control.Withdraw, TurnID: act.Withdraw.TurnID, Reason: act.Withdraw.Reason})
	case act.AppendUser != nil:
		a := act.AppendUser
		u := dialogue.Utterance{Speaker: dialogue.User, Text: a.Text, TurnID: a.TurnID}
		if err := c.m.store.AppendUtterance(ctx, u); err != nil {
			return fmt.Errorf("manager: storing user turn %d: %w", u.TurnID, err)
		}
		c.m.transcript = append(c.m.transcript, Entry{Speaker: dialogue.User, TurnID: u.TurnID, Text: u.Text, Start: a.Start, End: a.End})
		c.log.Info("user turn", zap.Int("turn", u.TurnID), zap.String("text", u.Text))
		return c.send(ctx, UserTurn{TurnID: u.TurnID, Text: u.Text, Start: a.Start, End: a.End})
	case act.AppendBackchannel != nil:
		return c.backchannel(ctx, act.AppendBackchannel)
	case act.Duck != nil:
		c.log.Info("ducking the agent", zap.Int("turn", act.Duck.TurnID), zap.Float64("gain_db", act.Duck.Gain), zap.String("reason", act.Duck.Reason))
		return c.send(ctx, control.Command{Action: control.Duck, TurnID: act.Duck.TurnID, Gain: act.Duck.Gain, Reason: act.Duck.Reason})
	case act.Unduck != nil:
		c.log.Info("restoring the agent's volume", zap.Int("turn", act.Unduck.TurnID), zap.String("reason", act.Unduck.Reason))
		return c.send(ctx, control.Command{Action: control.Unduck, TurnID: act.Unduck.TurnID, Reason: act.Unduck.Reason})
	case act.CloseAgent != nil:
		return c.closeAgent(ctx, act.CloseAgent)
	case act.Say != nil:
		c.log.Info("re-engaging", zap.Int("turn", act.Say.TurnID), zap.String("text", act.Say.Text))
		return c.send(ctx, tts.Text{TurnID: act.Say.TurnID, Text: act.Say.Text})
	case act.State != nil:
		return c.send(ctx, TurnState{State: act.State.To, AgentTurn: act.State.TurnID})
	}
	return nil
}

// closeAgent stores the agent turn as the state machine says, and tells the network
// (an agent-turn IU) what was stored.
func (c *conversation) closeAgent(ctx context.Context, ca *CloseAgent) error {
	rec := AgentTurn{TurnID: ca.TurnID, InReplyTo: ca.InReplyTo, Text: ca.Text, FullText: ca.Text,
		Interrupted: ca.Interrupted, Stored: true, Start: ca.Start, End: ca.End}
	entry := Entry{Speaker: dialogue.Agent, TurnID: ca.TurnID, Text: ca.Text, Start: ca.Start, End: ca.End}
	switch {
	case !ca.Interrupted && ca.Text == "":
		// Nothing was said (the LLM failed before any text, or its reply was empty): an
		// empty agent utterance would only teach the model to say nothing.
		c.log.Info("agent turn empty, not stored", zap.Int("turn", ca.TurnID))
		rec.Stored = false
	case !ca.Interrupted:
		if err := c.m.store.AppendUtterance(ctx, dialogue.Utterance{Speaker: dialogue.Agent, Text: ca.Text, TurnID: ca.TurnID}); err != nil {
			return fmt.Errorf("manager: storing agent turn %d: %w", ca.TurnID, err)
		}
	case ca.Heard == nil:
		// The listener heard nothing of it: for them the turn never happened.
		c.log.Info("agent turn dropped unheard", zap.Int("turn", ca.TurnID))
		rec.Text, rec.Stored = "", false
	default:
		u, err := c.m.store.CutInterrupted(ctx, *ca.Heard)
		if err != nil {
			return fmt.Errorf("manager: cutting agent turn %d to what was heard: %w", ca.TurnID, err)
		}
		rec.Text, rec.FullText = u.Text, u.FullText
		entry.Text, entry.FullText, entry.Interrupted = u.Text, u.FullText, true
		c.log.Info("agent turn cut to what was heard", zap.Int("turn", ca.TurnID), zap.String("heard", u.Text), zap.String("generated", u.FullText))
	}
	if rec.Stored {
		c.m.transcript = append(c.m.transcript, entry)
	}
	return c.send(ctx, rec)
}
