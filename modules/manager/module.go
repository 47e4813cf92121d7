// Package manager is the dialogue manager as a network module: it adapts the IUs of
// user speech (VAD, ASR, overlap), of the agent's reply (LLM, TTS) and of what the
// listener hears (speaker) to the events of the turn-taking policy (package
// turntaking), and the policy's actions to IUs — control commands, the re-engagement's
// text, and its own user-turn, agent-turn and turn-state IUs — and to operations on the
// dialogue history. The decisions are the policy's; the agent turn under way is its
// record, which the agent-turn IUs let others observe.
package manager

import (
	"context"
	"errors"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/turntaking"
	"go.uber.org/zap"
)

// HistoryStore is what the manager needs of the shared dialogue history
// (dialogue.Store implements it).
type HistoryStore interface {
	AppendUtterance(ctx context.Context, u dialogue.Utterance) error
	CutInterrupted(ctx context.Context, heard dialogue.Heard) (dialogue.Utterance, error)
	// AlignOptions is how it cuts an interrupted turn, for the agent turn's heard text.
	AlignOptions() dialogue.AlignOptions
}

// Options configure the manager module.
type Options struct {
	Turns turntaking.Config
	// EndTimeout is the longest the manager waits after the stream ended for a reply to
	// finish; default 120 s.
	EndTimeout time.Duration
	// Origin is the clock time the session's timeline starts at: the input stream's
	// positions and the speaker's output timeline count from it (zero: when Run starts).
	Origin time.Time
}

// Module is the dialogue manager as a network module. Its producers are the VAD (which
// also says when a recorded stream ended), the end-of-turn policy, the ASR, the LLM, the
// TTS and the speaker; its consumers are the LLM, the TTS and the speaker (control commands), and
// anything that shows the conversation (state and agent-turn IUs).
type Module struct {
	name  string
	store HistoryStore
	opts  Options
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

// conversation is the state of one Run beyond the policy, owned by the module's
// goroutine: the IU side of things.
type conversation struct {
	m      *Module
	p      *iu.Ports
	log    *zap.Logger
	origin time.Time
	turns  *turntaking.Policy
	// agent is the open agent-turn IU of the agent turn under way (nil: none).
	agent *iu.IU

	words       asr.WordList // the user's words in the utterance in progress
	wordsDirty  bool         // words changed in the batch being handled
	userOpen    bool         // a user turn began (speech) and its utterance has not arrived yet
	eotPending  bool         // an end of turn arrived and its utterance has not yet
	streamEnded bool
	endBy       time.Time
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	origin := m.opts.Origin
	if origin.IsZero() {
		origin = p.Now()
	}
	c := &conversation{m: m, p: p, log: p.Logger(), origin: origin, turns: turntaking.New(m.opts.Turns, m.store.AlignOptions())}
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
			// revokes and adds words together): the policy sees it whole.
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
		(c.turns.State() == turntaking.Idle || c.turns.State() == turntaking.SilenceAfterAgent)
	return quiet
}

func (c *conversation) at(d time.Duration) time.Time { return c.origin.Add(d) }

// handle gives the policy an event at the current time and carries out its
// actions.
func (c *conversation) handle(ctx context.Context, ev turntaking.Event) error {
	ev.At = c.p.Now()
	return c.do(ctx, c.turns.Handle(ev))
}

func (c *conversation) update(ctx context.Context, up iu.Update) error {
	u := up.IU
	switch pl := u.Payload.(type) {
	case vad.Candidate:
		switch up.Type {
		case iu.Add:
			return c.handle(ctx, turntaking.Event{Candidate: &turntaking.Candidate{Onset: c.at(pl.Start)}})
		case iu.Revoke:
			return c.handle(ctx, turntaking.Event{CandidateDropped: &turntaking.CandidateDropped{}})
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			c.userOpen = true
			return c.handle(ctx, turntaking.Event{SpeechStart: &turntaking.SpeechStart{Onset: c.at(pl.Start)}})
		case iu.Commit:
			return c.handle(ctx, turntaking.Event{SpeechEnd: &turntaking.SpeechEnd{End: c.at(pl.End)}})
		}
	case vad.Pause:
		switch up.Type {
		case iu.Add:
			return c.handle(ctx, turntaking.Event{SpeechPause: &turntaking.SpeechPause{End: c.at(pl.End)}})
		case iu.Revoke:
			return c.handle(ctx, turntaking.Event{SpeechResume: &turntaking.SpeechResume{}})
		}
	case vad.EndOfTurn:
		if up.Type == iu.Add {
			c.eotPending = true
			return c.handle(ctx, turntaking.Event{EndOfTurn: &turntaking.EndOfTurn{SpeechEnd: c.at(pl.SpeechEnd)}})
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
		words := make([]turntaking.ScoredWord, len(pl.Words))
		for i, w := range pl.Words {
			words[i] = turntaking.ScoredWord{Text: w.Text, Confidence: w.Confidence}
		}
		return c.handle(ctx, turntaking.Event{Utterance: &turntaking.Utterance{Text: pl.Text, Words: words, Start: pl.Start, End: pl.End}})
	case overlap.Evidence:
		if up.Type == iu.Revoke {
			return nil
		}
		return c.handle(ctx, turntaking.Event{Sound: c.sound(pl, up.Type == iu.Commit)})
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
		return c.handle(ctx, turntaking.Event{Reply: &turntaking.Reply{TurnID: pl.TurnID, Text: pl.Spoken, Clauses: pl.Clauses, Interrupted: pl.Interrupted, Err: err}})
	case tts.Chunk:
		if up.Type == iu.Add {
			return c.handle(ctx, turntaking.Event{AudioQueued: &turntaking.AudioQueued{TurnID: pl.TurnID, Last: pl.LastOfTurn}})
		}
	case speaker.Progress:
		return c.progress(ctx, pl)
	case vad.EndOfStream:
		// The VAD sends it after its last segment; a turn the end-of-turn policy has
		// still to end keeps the conversation going (userOpen).
		if up.Type == iu.Add {
			c.streamEnded = true
			c.endBy = c.p.Now().Add(c.m.opts.EndTimeout)
		}
	}
	return nil
}

// wordsChanged tells the policy the recogniser's new hypothesis, if it changed.
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
	return c.handle(ctx, turntaking.Event{Words: &turntaking.Words{Words: texts, All: all}})
}

// sound turns the overlap module's evidence into an event.
func (c *conversation) sound(e overlap.Evidence, final bool) *turntaking.OverlapSound {
	s := &turntaking.OverlapSound{Onset: c.at(e.Start), DecodedTo: e.DecodedTo, Decodes: e.Decodes, Ended: e.Ended, Dropped: e.Dropped, Final: final}
	switch e.Sound {
	case overlap.Noise:
		s.Kind = turntaking.SoundNoise
	case overlap.Hum:
		s.Kind = turntaking.SoundHum
	case overlap.Voice:
		s.Kind = turntaking.SoundVoice
	}
	if e.Ended {
		s.End = c.at(e.End)
	}
	for _, w := range e.Words {
		s.Words = append(s.Words, turntaking.ScoredWord{Text: w.Text, Confidence: w.Confidence})
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
	h := &turntaking.AudioHeard{
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
	h.Heard = pr.Text
	return c.handle(ctx, turntaking.Event{Audio: h})
}
