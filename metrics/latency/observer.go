// Package latency times each exchange of a conversation (metrics.Turn) from the IUs the
// modules send, as an iu.Observer: it takes no part in the conversation. It reads the
// payloads of the modules it times, so it lives beside package metrics, which stays
// free of them (the benchmarks and the summaries need no module).
package latency

import (
	"slices"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

// Options configure an Observer.
type Options struct {
	// Origin is the clock time the network started at, which stream positions (audio
	// times, the speaker's output timeline) count from.
	Origin time.Time
	// OnTurn, when set, receives each exchange's latencies when its agent turn ends (on
	// the manager's goroutine; it must not block).
	OnTurn func(metrics.Turn)
	// VirtualClock says the network runs on a virtual clock, where computation takes no
	// time: the turns say so (metrics.Turn.VirtualClock).
	VirtualClock bool
	Logger       *zap.Logger
}

// Observer times each exchange of a conversation (metrics.Turn: the user's turn and the
// agent's reply to it, and a barge-in over that reply) from the IUs the modules send.
// Register it with iu.WithObserver; read Turns after the network ran.
//
// An exchange starts with the user's utterance (its end of turn before it) and is the
// agent turn's that the manager begins next: the manager's agent-turn IU says when that
// turn is asked for (its ADD, just before the Respond), when the listener first hears
// it (its UPDATEs), and when it is over (its COMMIT). The LLM's clauses, the TTS's
// chunks, the VAD's candidates and segments and the speaker's pauses and stops time the
// steps in between.
type Observer struct {
	opts Options

	mu         sync.Mutex // Observe runs on every sending module's goroutine
	pendingEOT *endOfTurnTimes
	lastUser   *metrics.Turn // the latest utterance's exchange, until a reply takes it
	current    int           // the agent turn under way (0: none)
	agents     map[int]*agentTimes
	// early holds what a prepared reply's LLM and TTS did before the Respond that
	// confirms it, by agent turn (a withdrawal forgets it).
	early map[int]*earlyTimes
	turns []metrics.Turn
	spec  metrics.Speculation
	// streamOrigin is when the input stream's first sample was captured, learnt from a
	// microphone's frame (zero for recordings, whose stream starts with the network): a
	// device opens some time after the network starts, and the user's stream times count
	// from its first sample.
	streamOrigin time.Time
}

// earlyTimes are the steps of a prepared reply before it was confirmed.
type earlyTimes struct {
	prepare                             iu.ID // the Prepare command, which the preparation's clauses are grounded in
	clause                              iu.ID // the first clause (an earlier preparation's may still be in flight)
	firstToken, firstClause, firstChunk time.Time
}

type endOfTurnTimes struct {
	at, speechEnd time.Time
}

// agentTimes is what the observer follows of one agent turn.
type agentTimes struct {
	turn *metrics.Turn // nil for a turn no user turn asked for (a re-engagement)
	// heard: the listener heard it play (FirstAudible is set).
	heard bool
	// bargeTimed: the silence after a barge-in onset is timed; confirmedBarge: the
	// speech that paused the turn was confirmed by the VAD.
	bargeTimed, confirmedBarge bool
}

// New returns an observer with opts.
func New(opts Options) *Observer {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Observer{opts: opts, agents: map[int]*agentTimes{}, early: map[int]*earlyTimes{}}
}

// Speculation returns the counts of replies prepared ahead.
func (o *Observer) Speculation() metrics.Speculation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.spec
}

// Turns returns the latencies of every exchange whose agent turn ended, in order.
func (o *Observer) Turns() []metrics.Turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]metrics.Turn(nil), o.turns...)
}

// onOutput returns the clock time of the speaker's output timeline position d (it counts
// from the network's start).
func (o *Observer) onOutput(d time.Duration) time.Time { return o.opts.Origin.Add(d) }

// at returns the clock time of input stream position d.
func (o *Observer) at(d time.Duration) time.Time {
	if !o.streamOrigin.IsZero() {
		return o.streamOrigin.Add(d)
	}
	return o.opts.Origin.Add(d)
}

// Observe implements iu.Observer.
func (o *Observer) Observe(at time.Time, m iu.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, up := range m.Updates {
		o.update(at, up)
	}
}

// update takes one update sent at at.
func (o *Observer) update(at time.Time, up iu.Update) {
	u := up.IU
	switch pl := u.Payload.(type) {
	case audio.Frame:
		if o.streamOrigin.IsZero() && !pl.Captured.IsZero() {
			o.streamOrigin = pl.Captured.Add(-audio.SamplesToDuration(pl.Start, pl.Rate))
		}
	case vad.Candidate:
		a := o.agents[o.current]
		if a == nil || a.turn == nil {
			return
		}
		switch up.Type {
		case iu.Add:
			if !a.bargeTimed {
				a.turn.BargeInOnset = o.at(pl.Start)
			}
		case iu.Revoke:
			if !a.confirmedBarge {
				// Noise: the pause it caused is not a barge-in to time.
				a.turn.BargeInOnset, a.turn.AudioSilent, a.bargeTimed = time.Time{}, time.Time{}, false
			}
		}
	case vad.Segment:
		if a := o.agents[o.current]; a != nil && a.turn != nil && up.Type == iu.Add {
			if !a.bargeTimed && a.turn.BargeInOnset.IsZero() {
				a.turn.BargeInOnset = o.at(pl.Start)
			}
			a.confirmedBarge = a.turn.BargeInOnset.After(time.Time{})
		}
	case vad.EndOfTurn:
		if up.Type == iu.Add {
			o.pendingEOT = &endOfTurnTimes{at: u.Created, speechEnd: o.at(pl.SpeechEnd)}
		}
	case asr.Utterance:
		if up.Type != iu.Add {
			return
		}
		t := &metrics.Turn{ASRFinal: u.Created, VirtualClock: o.opts.VirtualClock}
		if e := o.pendingEOT; e != nil {
			t.EndOfTurn, t.UserSpeechEnd = e.at, e.speechEnd
		}
		o.pendingEOT = nil
		o.lastUser = t
	case control.Command:
		if up.Type == iu.Add && pl.Action == control.Prepare {
			o.spec.Prepared++
			o.early[pl.TurnID] = &earlyTimes{prepare: u.ID}
		}
		if up.Type == iu.Add && pl.Action == control.Withdraw {
			delete(o.early, pl.TurnID)
		}
	case manager.AgentTurn:
		switch up.Type {
		case iu.Add:
			o.begun(u, pl)
		case iu.UpdatePayload:
			o.heard(pl)
		case iu.Commit:
			o.ended(pl)
		}
	case llm.Clause:
		// The LLM's clauses (the turn-based pipeline's hold module sends them again,
		// later, as hold.Clause).
		if pl.ClauseID != 0 {
			return
		}
		if e := o.early[pl.TurnID]; e != nil {
			switch {
			case up.Type == iu.Add && e.clause == "" && slices.Contains(u.GroundedIn, e.prepare):
				e.clause, e.firstToken = u.ID, u.Created
			case up.Type == iu.UpdatePayload && u.ID == e.clause && pl.Prepared && e.firstClause.IsZero():
				e.firstClause = at
			}
			return
		}
		a := o.agents[pl.TurnID]
		if a == nil || a.turn == nil {
			return
		}
		switch up.Type {
		case iu.Add:
			if a.turn.FirstToken.IsZero() {
				a.turn.FirstToken = u.Created
			}
		case iu.Commit, iu.UpdatePayload:
			// The clause is complete when it is committed, or, in a prepared reply,
			// when it is marked prepared (the TTS synthesises it then).
			if a.turn.FirstClause.IsZero() && (up.Type == iu.Commit || pl.Prepared) {
				a.turn.FirstClause = at
			}
		}
	case llm.Reply:
		if up.Type == iu.Add && pl.Prepared {
			o.spec.Hits++
		}
		if up.Type == iu.Add && pl.Withdrawn {
			o.spec.Withdrawn++
			o.spec.WastedTokens += pl.Result.Tokens
		}
	case tts.Chunk:
		// The first chunk of the preparation's first clause: chunks of an earlier
		// preparation of the same turn, withdrawn, may still come.
		if e := o.early[pl.TurnID]; e != nil && up.Type == iu.Add && e.firstChunk.IsZero() && e.clause != "" && slices.Contains(u.GroundedIn, e.clause) {
			e.firstChunk = u.Created
		}
		if a := o.agents[pl.TurnID]; a != nil && a.turn != nil && up.Type == iu.Add && a.turn.FirstChunk.IsZero() {
			a.turn.FirstChunk = u.Created
		}
	case speaker.Progress:
		o.progress(pl)
	}
}

// begun starts following the agent turn the manager asks for, created at u: the
// exchange of the latest utterance, unless the turn says a fixed text (a re-engagement,
// which nothing the user said led to).
func (o *Observer) begun(u iu.IU, rec manager.AgentTurn) {
	if rec.Fixed {
		o.lastUser = nil
		o.agents[rec.TurnID] = &agentTimes{}
		o.current = rec.TurnID
		return
	}
	a := &agentTimes{turn: o.lastUser}
	o.lastUser = nil
	if a.turn != nil {
		a.turn.AgentTurn = rec.TurnID
		a.turn.Respond = u.Created
		if e := o.early[rec.TurnID]; e != nil {
			a.turn.Prepared = true
			a.turn.FirstToken, a.turn.FirstClause, a.turn.FirstChunk = e.firstToken, e.firstClause, e.firstChunk
		}
	}
	delete(o.early, rec.TurnID)
	o.agents[rec.TurnID] = a
	o.current = rec.TurnID
}

// heard notes when the listener first heard the agent turn, from the manager's record.
func (o *Observer) heard(rec manager.AgentTurn) {
	a := o.agents[rec.TurnID]
	if a == nil || !rec.Heard || a.heard {
		return
	}
	a.heard = true
	if a.turn != nil {
		a.turn.FirstAudible = o.onOutput(rec.Start)
	}
}

// progress times a barge-in's silence: when the output fell silent after its onset.
func (o *Observer) progress(pr speaker.Progress) {
	c, ok := pr.Item.(tts.Chunk)
	if !ok {
		return
	}
	a := o.agents[c.TurnID]
	if a == nil {
		return
	}
	if (pr.State == speaker.Paused || pr.State == speaker.Stopped) && a.turn != nil &&
		!a.turn.BargeInOnset.IsZero() && !a.bargeTimed {
		// Pos is when the output actually falls silent (it lies ahead while the device
		// still plays what it held).
		a.turn.AudioSilent = o.onOutput(pr.Pos)
		a.bargeTimed = true
	}
}

// ended closes the exchange of an agent turn that is over.
func (o *Observer) ended(rec manager.AgentTurn) {
	a := o.agents[rec.TurnID]
	delete(o.agents, rec.TurnID)
	if o.current == rec.TurnID {
		o.current = 0
	}
	if a == nil || a.turn == nil {
		return
	}
	t := *a.turn
	t.UserTurn = rec.InReplyTo
	t.Interrupted = rec.Interrupted
	o.turns = append(o.turns, t)
	if o.opts.OnTurn != nil {
		o.opts.OnTurn(t)
	}
	o.opts.Logger.Info("latencies", zap.Stringer("turn", t))
}
