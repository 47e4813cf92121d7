package manager

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
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
	// OnMetrics, when set, receives each exchange's latencies when the agent turn closes
	// (on the module's goroutine; it must not block).
	OnMetrics func(metrics.Turn)
	// EndTimeout is the longest the manager waits after the stream ended for a reply to
	// finish; default 120 s.
	EndTimeout time.Duration
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
	// Start and End are times on the session's timeline (since the session started):
	// the user's speech, or the agent's audio from first to last heard.
	Start, End time.Duration
}

// Module is the dialogue manager as a network module. Its producers are the VAD (which
// also passes on the end of a recorded stream), the ASR, the LLM, the TTS and the
// speaker; its
// consumers are the LLM, the TTS and the speaker (control commands), and anything that
// shows the conversation (state IUs).
type Module struct {
	name  string
	store HistoryStore
	opts  Options

	// Written by the module's goroutine only; read them after the network returned.
	transcript []Entry
	metrics    []metrics.Turn
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

// Metrics returns the latencies of every exchange; call it after Run returned.
func (m *Module) Metrics() []metrics.Turn { return m.metrics }

// agentRecord is what the manager knows of one agent turn beyond the state machine.
type agentRecord struct {
	id      int
	say     string // fixed text of a re-engagement turn
	clauses map[int]string
	reply   *llm.Reply
	// chunk bookkeeping, to know how much of the word being heard was heard
	chunks      map[iu.ID]chunkInfo
	wordSamples map[[2]int]int
	heard       *speaker.Progress // the latest report about this turn's audio
	heardAny    bool
	firstHeard  time.Duration
	lastHeard   time.Duration
	metrics     *metrics.Turn
	bargeTimed  bool
	// confirmedBarge: the user speech that paused this turn was confirmed by the VAD.
	confirmedBarge bool
}

type chunkInfo struct {
	chunk  tts.Chunk
	before int // samples of the same word in earlier chunks
}

// run is the state of one Run, owned by the module's goroutine.
type run struct {
	m      *Module
	p      *iu.Ports
	log    *zap.Logger
	origin time.Time
	turns  *Turns

	agents map[int]*agentRecord
	words  []wordIU // the ASR's open and committed words of the utterance in progress

	userStart   time.Duration
	userEnd     time.Duration
	userOpen    bool // a user turn began (speech) and its utterance has not arrived yet
	pendingEOT  *eotInfo
	lastUser    *metrics.Turn
	streamEnded bool
	endBy       time.Time
}

type wordIU struct {
	id        iu.ID
	text      string
	stability float32
}

type eotInfo struct {
	at        time.Time
	speechEnd time.Time
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	r := &run{m: m, p: p, log: p.Logger(), origin: p.Now(), turns: NewTurns(m.opts.Turns), agents: map[int]*agentRecord{}}
	for {
		deadline := r.turns.Deadline()
		if !r.endBy.IsZero() && (deadline.IsZero() || r.endBy.Before(deadline)) {
			deadline = r.endBy
		}
		ev, err := p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			return nil
		case iu.EventDeadline:
			if err := r.do(ctx, r.turns.Tick(p.Now())); err != nil {
				return err
			}
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if err := r.update(ctx, up); err != nil {
					return err
				}
			}
		}
		if r.finished() {
			return nil
		}
	}
}

// finished reports whether a replay is over: the stream ended, nobody speaks, and the
// agent has nothing left to say.
func (r *run) finished() bool {
	if !r.streamEnded {
		return false
	}
	now := r.p.Now()
	if !r.endBy.IsZero() && !now.Before(r.endBy) {
		r.log.Warn("ending the session although the conversation is not over", zap.Stringer("state", r.turns.State()))
		return true
	}
	quiet := !r.userOpen && r.pendingEOT == nil && r.turns.AgentTurn() == 0 &&
		(r.turns.State() == Idle || r.turns.State() == SilenceAfterAgent)
	return quiet
}

func (r *run) at(d time.Duration) time.Time { return r.origin.Add(d) }

func (r *run) event(ev Event) Event {
	ev.At = r.p.Now()
	return ev
}

func (r *run) update(ctx context.Context, up iu.Update) error {
	u := up.IU
	switch pl := u.Payload.(type) {
	case vad.Candidate:
		a := r.agents[r.turns.AgentTurn()]
		switch up.Type {
		case iu.Add:
			if a != nil && a.metrics != nil && !a.bargeTimed {
				a.metrics.BargeInOnset = r.at(pl.Start)
			}
			return r.do(ctx, r.turns.Handle(r.event(Event{Candidate: &Candidate{Onset: r.at(pl.Start)}})))
		case iu.Revoke:
			if a != nil && a.metrics != nil && !a.confirmedBarge {
				// Noise: the pause it caused is not a barge-in to time.
				a.metrics.BargeInOnset, a.metrics.AudioSilent, a.bargeTimed = time.Time{}, time.Time{}, false
			}
			return r.do(ctx, r.turns.Handle(r.event(Event{CandidateDropped: &CandidateDropped{}})))
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			r.userOpen = true
			r.userStart = pl.Start
			if a := r.agents[r.turns.AgentTurn()]; a != nil && a.metrics != nil {
				if !a.bargeTimed && a.metrics.BargeInOnset.IsZero() {
					a.metrics.BargeInOnset = r.at(pl.Start)
				}
				a.confirmedBarge = a.metrics.BargeInOnset.After(time.Time{})
			}
			return r.do(ctx, r.turns.Handle(r.event(Event{SpeechStart: &SpeechStart{Onset: r.at(pl.Start)}})))
		case iu.Commit:
			return r.do(ctx, r.turns.Handle(r.event(Event{SpeechEnd: &SpeechEnd{End: r.at(pl.End)}})))
		}
	case vad.EndOfTurn:
		if up.Type == iu.Add {
			r.pendingEOT = &eotInfo{at: u.Created, speechEnd: r.at(pl.SpeechEnd)}
			return r.do(ctx, r.turns.Handle(r.event(Event{EndOfTurn: &EndOfTurn{SpeechEnd: r.at(pl.SpeechEnd)}})))
		}
	case asr.Word:
		switch up.Type {
		case iu.Add:
			r.words = append(r.words, wordIU{id: u.ID, text: pl.Text, stability: pl.Stability})
		case iu.UpdatePayload, iu.Commit:
			for i := range r.words {
				if r.words[i].id == u.ID {
					r.words[i].text, r.words[i].stability = pl.Text, pl.Stability
					if up.Type == iu.Commit {
						r.words[i].stability = 1
					}
				}
			}
		case iu.Revoke:
			for i := range r.words {
				if r.words[i].id == u.ID {
					r.words = append(r.words[:i], r.words[i+1:]...)
					break
				}
			}
		default:
			return nil
		}
		// Flickering partial words must not decide a barge-in; only those the
		// recogniser has settled on count.
		var texts []string
		for _, w := range r.words {
			if w.stability >= r.m.opts.Turns.BargeIn.MinStability {
				texts = append(texts, w.text)
			}
		}
		return r.do(ctx, r.turns.Handle(r.event(Event{Words: &Words{Words: texts}})))
	case asr.Utterance:
		if up.Type != iu.Add {
			return nil
		}
		r.words = nil
		r.userOpen = false
		mt := &metrics.Turn{ASRFinal: u.Created}
		if e := r.pendingEOT; e != nil {
			mt.EndOfTurn, mt.UserSpeechEnd = e.at, e.speechEnd
		}
		r.pendingEOT = nil
		r.lastUser = mt
		r.userStart, r.userEnd = pl.Start, pl.End
		return r.do(ctx, r.turns.Handle(r.event(Event{Utterance: &Utterance{Text: pl.Text}})))
	case llm.Clause:
		a := r.agents[pl.TurnID]
		if a == nil {
			return nil
		}
		switch up.Type {
		case iu.Add:
			if pl.ClauseID == 0 && a.metrics != nil && a.metrics.FirstToken.IsZero() {
				a.metrics.FirstToken = u.Created
			}
		case iu.Commit:
			a.clauses[pl.ClauseID] = pl.Text
			if pl.ClauseID == 0 && a.metrics != nil {
				a.metrics.FirstClause = u.Created
			}
		}
	case llm.Reply:
		if up.Type != iu.Add {
			return nil
		}
		a := r.agents[pl.TurnID]
		if a == nil {
			return nil
		}
		reply := pl
		a.reply = &reply
		if pl.Err != "" {
			r.log.Warn("the LLM failed during the reply", zap.Int("turn", pl.TurnID), zap.String("error", pl.Err))
		}
		var err error
		if pl.Err != "" {
			err = errors.New(pl.Err)
		}
		return r.do(ctx, r.turns.Handle(r.event(Event{Reply: &Reply{TurnID: pl.TurnID, Text: pl.Spoken, Interrupted: pl.Interrupted, Err: err}})))
	case tts.Chunk:
		if up.Type != iu.Add {
			return nil
		}
		a := r.agents[pl.TurnID]
		if a == nil {
			return nil
		}
		key := [2]int{pl.ClauseID, pl.WordIndex}
		a.chunks[u.ID] = chunkInfo{chunk: pl, before: a.wordSamples[key]}
		a.wordSamples[key] += pl.Audio.Len()
		if a.metrics != nil && a.metrics.FirstChunk.IsZero() {
			a.metrics.FirstChunk = u.Created
		}
		return r.do(ctx, r.turns.Handle(r.event(Event{AudioQueued: &AudioQueued{TurnID: pl.TurnID, Last: pl.LastOfTurn}})))
	case speaker.Progress:
		return r.progress(ctx, pl)
	case audio.EndOfStream:
		// Passed on by the VAD after its last segment and end of turn.
		if up.Type == iu.Add {
			r.streamEnded = true
			r.endBy = r.p.Now().Add(r.m.opts.EndTimeout)
		}
	}
	return nil
}

func (r *run) progress(ctx context.Context, pr speaker.Progress) error {
	c, ok := pr.Item.(tts.Chunk)
	if !ok {
		return nil
	}
	a := r.agents[c.TurnID]
	if a == nil {
		return nil
	}
	copyPr := pr
	a.heard = &copyPr
	if pr.State == speaker.Playing {
		if !a.heardAny {
			a.heardAny = true
			a.firstHeard = pr.Pos
			if a.metrics != nil {
				a.metrics.FirstAudible = r.at(pr.Pos)
			}
		}
		a.lastHeard = pr.Pos
	}
	if (pr.State == speaker.Paused || pr.State == speaker.Stopped) && a.metrics != nil &&
		!a.metrics.BargeInOnset.IsZero() && !a.bargeTimed {
		// Pos is when the output actually falls silent (it lies ahead while the device
		// still plays what it held).
		a.metrics.AudioSilent = r.at(pr.Pos)
		a.bargeTimed = true
	}
	if pr.Tail && (pr.State == speaker.Paused || pr.State == speaker.Stopped) {
		a.lastHeard = pr.Pos // the audio still coming out ends then
	}
	h := &AudioHeard{
		TurnID:   c.TurnID,
		Audible:  pr.Audible(),
		Finished: pr.Finished() && c.LastOfTurn && pr.Heard != "",
		Stopped:  pr.State == speaker.Stopped && !pr.Tail,
	}
	if h.Finished {
		a.lastHeard = pr.Pos
	}
	return r.do(ctx, r.turns.Handle(r.event(Event{Audio: h})))
}

// do carries out the state machine's actions in order.
func (r *run) do(ctx context.Context, acts []Action) error {
	for _, act := range acts {
		if err := r.act(ctx, act); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) send(ctx context.Context, p iu.Payload) error {
	u := r.p.NewIU(p)
	return r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

func (r *run) act(ctx context.Context, act Action) error {
	switch {
	case act.Respond != nil:
		a := r.newAgent(act.Respond.TurnID)
		if a.metrics != nil {
			a.metrics.Respond = r.p.Now()
		}
		r.log.Info("reply requested", zap.Int("turn", act.Respond.TurnID), zap.String("reason", act.Respond.Reason))
		return r.send(ctx, control.Command{Action: control.Respond, TurnID: act.Respond.TurnID, Reason: act.Respond.Reason})
	case act.Pause != nil:
		r.log.Info("pausing the agent", zap.Int("turn", act.Pause.TurnID), zap.String("reason", act.Pause.Reason))
		return r.send(ctx, control.Command{Action: control.Pause, TurnID: act.Pause.TurnID, Reason: act.Pause.Reason})
	case act.Resume != nil:
		r.log.Info("resuming the agent", zap.Int("turn", act.Resume.TurnID), zap.String("reason", act.Resume.Reason))
		return r.send(ctx, control.Command{Action: control.Resume, TurnID: act.Resume.TurnID, Reason: act.Resume.Reason})
	case act.Interrupt != nil:
		r.log.Info("interrupting the agent", zap.Int("turn", act.Interrupt.TurnID), zap.String("reason", act.Interrupt.Reason))
		return r.send(ctx, control.Command{Action: control.Interrupt, TurnID: act.Interrupt.TurnID, Reason: act.Interrupt.Reason})
	case act.AppendUser != nil:
		u := dialogue.Utterance{Speaker: dialogue.User, Text: act.AppendUser.Text, TurnID: act.AppendUser.TurnID}
		if err := r.m.store.AppendUtterance(ctx, u); err != nil {
			return fmt.Errorf("manager: storing user turn %d: %w", u.TurnID, err)
		}
		if r.lastUser != nil {
			r.lastUser.UserTurn = u.TurnID
		}
		r.m.transcript = append(r.m.transcript, Entry{Speaker: dialogue.User, TurnID: u.TurnID, Text: u.Text, Start: r.userStart, End: r.userEnd})
		r.log.Info("user turn", zap.Int("turn", u.TurnID), zap.String("text", u.Text))
	case act.CloseAgent != nil:
		return r.closeAgent(ctx, act.CloseAgent)
	case act.Say != nil:
		a := r.newAgent(act.Say.TurnID)
		a.say = act.Say.Text
		a.metrics = nil // nothing the user said led to it
		r.log.Info("re-engaging", zap.Int("turn", act.Say.TurnID), zap.String("text", act.Say.Text))
		return r.send(ctx, tts.Text{TurnID: act.Say.TurnID, Text: act.Say.Text})
	case act.State != nil:
		return r.send(ctx, TurnState{State: act.State.To, AgentTurn: act.State.TurnID})
	}
	return nil
}

func (r *run) newAgent(id int) *agentRecord {
	a := &agentRecord{id: id, clauses: map[int]string{}, chunks: map[iu.ID]chunkInfo{}, wordSamples: map[[2]int]int{}}
	if r.lastUser != nil {
		a.metrics = r.lastUser
		a.metrics.AgentTurn = id
		r.lastUser = nil
	}
	r.agents[id] = a
	return a
}

func (r *run) closeAgent(ctx context.Context, c *CloseAgent) error {
	a := r.agents[c.TurnID]
	delete(r.agents, c.TurnID)
	if a == nil {
		return nil
	}
	if a.metrics != nil {
		a.metrics.Interrupted = c.Interrupted
		r.m.metrics = append(r.m.metrics, *a.metrics)
		if r.m.opts.OnMetrics != nil {
			r.m.opts.OnMetrics(*a.metrics)
		}
		r.log.Info("latencies", zap.Stringer("turn", a.metrics))
	}
	entry := Entry{Speaker: dialogue.Agent, TurnID: c.TurnID, Start: a.firstHeard, End: a.lastHeard}
	full := strings.TrimSpace(c.Text)
	if a.say != "" {
		full = a.say
	}
	switch {
	case !c.Interrupted:
		entry.Text = full
		if err := r.m.store.AppendUtterance(ctx, dialogue.Utterance{Speaker: dialogue.Agent, Text: full, TurnID: c.TurnID}); err != nil {
			return fmt.Errorf("manager: storing agent turn %d: %w", c.TurnID, err)
		}
	case !a.heardAny:
		// The listener heard nothing of it: for them the turn never happened.
		r.log.Info("agent turn dropped unheard", zap.Int("turn", c.TurnID))
		return nil
	default:
		heard, err := a.heardPosition(c.TurnID)
		if err != nil {
			return err
		}
		u, err := r.m.store.CutInterrupted(ctx, heard)
		if err != nil {
			return fmt.Errorf("manager: cutting agent turn %d to what was heard: %w", c.TurnID, err)
		}
		entry.Text, entry.FullText, entry.Interrupted = u.Text, u.FullText, true
		r.log.Info("agent turn cut to what was heard", zap.Int("turn", c.TurnID), zap.String("heard", u.Text), zap.String("generated", u.FullText))
	}
	r.m.transcript = append(r.m.transcript, entry)
	return nil
}

// heardPosition turns the speaker's last report into the history's alignment input.
func (a *agentRecord) heardPosition(turnID int) (dialogue.Heard, error) {
	var clauses []string
	if a.reply != nil && len(a.reply.Clauses) > 0 {
		clauses = a.reply.Clauses
	} else {
		ids := make([]int, 0, len(a.clauses))
		for id := range a.clauses {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			clauses = append(clauses, a.clauses[id])
		}
	}
	if a.say != "" {
		clauses = []string{a.say}
	}
	pr := a.heard
	if pr == nil {
		return dialogue.Heard{}, fmt.Errorf("manager: turn %d: no report of what was heard", turnID)
	}
	ci, ok := a.chunks[pr.Heard]
	if !ok {
		return dialogue.Heard{}, fmt.Errorf("manager: turn %d: the speaker reports audio %s the TTS never sent", turnID, pr.Heard)
	}
	c := ci.chunk
	h := dialogue.Heard{TurnID: turnID, ClauseID: c.ClauseID, Clauses: clauses}
	if c.WordIndex < 0 {
		// A pause: everything up to the end of the last word was heard.
		h.WordStart, h.WordEnd = c.CharEnd, c.CharEnd
		return h, nil
	}
	h.WordStart, h.WordEnd = c.CharStart, c.CharEnd
	if total := a.wordSamples[[2]int{c.ClauseID, c.WordIndex}]; total > 0 {
		h.WordFraction = float64(ci.before+min(pr.Offset, c.Audio.Len())) / float64(total)
	}
	return h, nil
}
