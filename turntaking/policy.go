package turntaking

import (
	"strings"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
)

// Policy is the turn-taking policy: a clock-free state machine, events in (Handle,
// Tick at its Deadline), actions out. It composes the parts that each own their state —
// the agent turn under way (agentTurn), the barge-in under evaluation (bargeIn), the
// bookkeeping of backchannels (backchannels), the preparation of replies (preparer) and
// the turn ids (turnIDs) — and decides who has the floor. It is not safe for concurrent
// use: its owner's goroutine drives it.
type Policy struct {
	cfg Config
	lex *lexicon
	// cut is how the history cuts an interrupted turn back to what was heard, for the
	// heard text of the agent turn under way (AgentHeard).
	cut dialogue.AlignOptions

	ids   turnIDs
	state State

	userSpeaking bool
	// overlapUtterance marks the utterance in progress as begun over the agent; if it
	// only holds backchannels it is not a turn.
	overlapUtterance bool

	agent *agentTurn
	barge *bargeIn
	backs backchannels
	prep  preparer
	// pendingUser holds a user utterance that arrived before the agent turn was closed;
	// it is stored right after, to keep the history in order.
	pendingUser *UserTurn

	lastActivity time.Time
	reengaged    int
	// agentSpokeLast tells, when nobody speaks, whether that silence follows the agent.
	agentSpokeLast bool
}

// New returns a policy with cfg; cut is how the history cuts interrupted turns (the
// dialogue.Store's AlignOptions), so that the agent's heard text is what it would keep.
func New(cfg Config, cut dialogue.AlignOptions) *Policy {
	lex := newLexicon(cfg.BargeIn)
	return &Policy{cfg: cfg, lex: lex, cut: cut, ids: turnIDs{next: 1},
		backs: backchannels{cfg: cfg.BargeIn, lex: lex}, prep: preparer{after: cfg.Prepare.After}}
}

// State returns the current conversation state.
func (t *Policy) State() State { return t.state }

// AgentTurn returns the agent turn under way (0 when none).
func (t *Policy) AgentTurn() int {
	if t.agent == nil {
		return 0
	}
	return t.agent.id
}

// agentActive reports whether an agent turn is under way and not yet interrupted.
func (t *Policy) agentActive() bool { return t.agent != nil && !t.agent.interrupted }

// Deadline returns when Tick must next be called (zero: no deadline).
func (t *Policy) Deadline() time.Time {
	var d time.Time
	earliest := func(at time.Time) {
		if !at.IsZero() && (d.IsZero() || at.Before(d)) {
			d = at
		}
	}
	if b := t.barge; b != nil && !b.resolved && t.agentActive() {
		earliest(b.deadline())
	}
	if t.reengageDue() {
		earliest(t.lastActivity.Add(t.cfg.Reengage.After))
	}
	earliest(t.prep.deadline(t.userSpeaking, t.agent != nil))
	return d
}

// reengageDue reports whether the agent will speak up if the silence goes on.
func (t *Policy) reengageDue() bool {
	r := t.cfg.Reengage
	return r.After > 0 && t.state == SilenceAfterAgent && t.agent == nil && t.reengaged < max(r.Max, 1) && !t.lastActivity.IsZero()
}

// Tick lets deadlines take effect at time now.
func (t *Policy) Tick(now time.Time) []Action {
	var acts []Action
	if t.barge != nil && !t.barge.resolved {
		acts = t.evaluateBargeIn(now, acts)
	}
	acts = t.maybePrepare(now, acts)
	if r := t.cfg.Reengage; t.reengageDue() && !now.Before(t.lastActivity.Add(r.After)) {
		t.reengaged++
		t.lastActivity = now
		acts = t.speakUnprompted(r.Text, "re-engage after silence", acts)
	}
	return acts
}

// speakUnprompted begins an agent turn that answers no user turn: text, or (text "") a
// turn the LLM generates.
func (t *Policy) speakUnprompted(text, reason string, acts []Action) []Action {
	t.agent = newUnprompted(t.ids.take(), text)
	acts = append(acts, t.agent.begin())
	if text != "" {
		acts = append(acts, Action{Say: &Say{TurnID: t.agent.id, Text: text}})
	} else {
		acts = command(acts, control.Respond, t.agent.id, reason)
	}
	return t.setState(SilenceAfterUser, acts)
}

// unheard reports whether u, an utterance without words, is speech to ask for again:
// long enough (UnheardConfig), not over the agent, and with the agent silent.
func (t *Policy) unheard(u *Utterance, overlap bool) bool {
	c := t.cfg.Unheard
	return c.Text != "" && c.MinSpeech > 0 && !overlap && t.agent == nil && u.End-u.Start >= c.MinSpeech
}

// Handle applies one event and returns what to do.
func (t *Policy) Handle(ev Event) []Action {
	var acts []Action
	switch {
	case ev.Candidate != nil:
		acts = t.candidate(ev.Candidate, acts)
	case ev.CandidateDropped != nil:
		if b := t.barge; b != nil && b.tentative && !b.resolved && t.agent != nil {
			t.keepDroppedVoice(b)
			acts = t.resume(acts, "noise, not speech")
		}
		if t.backs.carried != nil && !t.userSpeaking {
			// The sound that interrupted was too short to be speech, and leaves no
			// transcript: the piece before it is the user's turn.
			acts = t.handleUtterance(Event{At: ev.At, Utterance: &Utterance{}}, acts)
		}
	case ev.SpeechStart != nil:
		acts = t.speechStart(ev, acts)
	case ev.SpeechPause != nil:
		if t.userSpeaking {
			t.prep.pausedAt = ev.SpeechPause.End
			acts = t.maybePrepare(ev.At, acts)
		}
	case ev.SpeechResume != nil:
		if !t.prep.pausedAt.IsZero() {
			t.prep.pausedAt = time.Time{}
			acts = t.withdraw(acts, "the user goes on")
		}
	case ev.SpeechEnd != nil:
		t.prep.pausedAt = time.Time{}
		t.userSpeaking = false
		t.lastActivity = ev.At
		t.prep.speechEndAt = ev.SpeechEnd.End
		if b := t.barge; b != nil && !b.resolved {
			b.speechEnded(ev.SpeechEnd.End)
			acts = t.evaluateBargeIn(ev.At, acts)
		}
		if t.state == UserSpeaking {
			acts = t.setState(SilenceAfterUser, acts)
		}
		acts = t.maybePrepare(ev.At, acts)
	case ev.Words != nil:
		if b := t.barge; b != nil && !b.resolved {
			b.hearWords(ev.Words.Words)
			acts = t.evaluateBargeIn(ev.At, acts)
		}
		if t.prep.hear(ev.Words.All) {
			acts = t.withdraw(acts, "the words changed")
		}
		acts = t.maybePrepare(ev.At, acts)
	case ev.EndOfTurn != nil:
		t.lastActivity = ev.At
	case ev.Utterance != nil:
		acts = t.handleUtterance(ev, acts)
	case ev.Reply != nil:
		if a := t.agent; a != nil && a.id == ev.Reply.TurnID {
			a.takeReply(ev.Reply)
			acts = t.maybeCloseAgent(acts)
		}
	case ev.AudioQueued != nil:
		if a := t.agent; a != nil && a.id == ev.AudioQueued.TurnID {
			a.queued(ev.AudioQueued.Last)
		}
		t.prep.queued(ev.AudioQueued.TurnID, ev.AudioQueued.Last)
	case ev.Audio != nil:
		acts = t.handleAudio(ev, acts)
	case ev.Sound != nil:
		acts = t.handleSound(ev, acts)
	}
	return acts
}

func (t *Policy) speechStart(ev Event, acts []Action) []Action {
	if b := t.barge; b != nil && b.tentative && !b.resolved {
		// The candidate that held the agent is confirmed speech.
		b.confirm(ev.SpeechStart.Onset)
		t.userSpeaking = true
		t.lastActivity = ev.At
		t.overlapUtterance = true
		acts = t.setState(Overlap, acts)
		return t.evaluateBargeIn(ev.At, acts)
	}
	t.userSpeaking = true
	t.lastActivity = ev.At
	t.prep.speechStarted()
	acts = t.withdraw(acts, "the user goes on")
	if t.agentActive() && t.cfg.BargeIn.Enabled {
		// The agent is talking or about to: hold its audio while we find out whether
		// this is a real interruption (or the user simply going on with their turn).
		t.beginBargeIn(ev.SpeechStart.Onset, false)
		t.overlapUtterance = true
		acts = t.hold(acts, "user speech")
		acts = t.setState(Overlap, acts)
		return t.evaluateBargeIn(ev.At, acts)
	}
	t.overlapUtterance = t.agentActive()
	if t.agentActive() {
		return t.setState(Overlap, acts)
	}
	return t.setState(UserSpeaking, acts)
}

func (t *Policy) handleUtterance(ev Event, acts []Action) []Action {
	text := strings.TrimSpace(ev.Utterance.Text)
	overlap := t.overlapUtterance
	t.overlapUtterance = false
	t.lastActivity = ev.At
	t.prep.turnTaken()
	acts = t.decideOnUtterance(strings.Fields(text), acts)
	carried := t.backs.takeCarried()
	if text == "" && carried != nil {
		// The sound that interrupted has no words; the piece before it has.
		ev.Utterance, text, carried = carried, strings.TrimSpace(carried.Text), nil
	}
	if text == "" {
		t.backs.forget()
		// Noise, or words the recogniser missed: no turn.
		acts = t.withdraw(acts, "no words after all")
		if t.unheard(ev.Utterance, overlap) {
			return t.speakUnprompted(t.cfg.Unheard.Text, "speech without words", acts)
		}
		// Fall back to what the agent is doing.
		return t.settle(acts)
	}
	u := ev.Utterance
	bc, ok, joined := t.backs.classify(u, overlap, t.agent)
	if ok {
		// "mm-hmm" over the agent is not a turn: the agent went on (or will), and the
		// history keeps it as a backchannel after the agent's turn.
		if bc = t.backs.record(bc, t.AgentTurn()); bc != nil {
			acts = append(acts, Action{Backchannel: bc})
		}
		return acts
	}
	if joined == nil && carried != nil {
		joined = joinUtterances(carried, u)
	}
	if joined != nil {
		u, text = joined, joined.Text
	}
	t.reengaged = 0
	user := &UserTurn{Text: text, Start: u.Start, End: u.End}
	if t.agent == nil {
		if p := t.prep.confirm(text); p != nil {
			// The reply prepared for exactly these words is the answer: it plays at once.
			user.TurnID = p.userTurn
			t.agent = &agentTurn{id: p.agentTurn, inReplyTo: p.userTurn, prepared: true,
				audioQueued: p.audioQueued, lastQueued: p.lastQueued}
			acts = append(acts, Action{User: user})
			t.agentSpokeLast = false
			acts = append(acts, t.agent.begin())
			acts = command(acts, control.Respond, t.agent.id, "user turn ended (reply prepared)")
			return t.setState(SilenceAfterUser, acts)
		}
	}
	acts = t.withdraw(acts, "the turn ended with other words")
	user.TurnID = t.ids.take()
	if t.agent != nil {
		// The agent turn must be closed before the user's words follow it in the
		// history: an interrupted one with what was heard, one the user did not
		// interrupt (its last words were playing, say) with everything it said.
		t.pendingUser = user
		return t.maybeCloseAgent(acts)
	}
	return t.startReply(user, acts)
}

func (t *Policy) startReply(user *UserTurn, acts []Action) []Action {
	acts = append(acts, Action{User: user})
	t.agentSpokeLast = false
	t.agent = &agentTurn{id: t.ids.take(), inReplyTo: user.TurnID}
	acts = append(acts, t.agent.begin())
	acts = command(acts, control.Respond, t.agent.id, "user turn ended")
	return t.setState(SilenceAfterUser, acts)
}

func (t *Policy) handleAudio(ev Event, acts []Action) []Action {
	h := ev.Audio
	a := t.agent
	if a == nil || a.id != h.TurnID {
		return acts
	}
	finished := a.hear(ev.At, h)
	if a.audible {
		t.lastActivity = ev.At
		if t.state != Overlap {
			acts = t.setState(AgentSpeaking, acts)
		}
	}
	if finished {
		t.lastActivity = ev.At
	}
	if heard := a.heardChange(t.cut); heard != nil {
		acts = append(acts, Action{AgentHeard: heard})
	}
	return t.maybeCloseAgent(acts)
}

// maybeCloseAgent stores the agent turn once everything about it is known.
func (t *Policy) maybeCloseAgent(acts []Action) []Action {
	a := t.agent
	if a == nil || !a.done(t.pendingUser != nil) {
		return acts
	}
	t.agent = nil
	t.barge = nil
	acts = append(acts, Action{CloseAgent: a.close()})
	for _, bc := range t.backs.flush() {
		acts = append(acts, Action{Backchannel: bc})
	}
	t.agentSpokeLast = a.heard || !a.interrupted
	if u := t.pendingUser; u != nil {
		t.pendingUser = nil
		return t.startReply(u, acts)
	}
	return t.settle(acts)
}

// maybePrepare prepares the reply once the silence after the user's speech has lasted.
func (t *Policy) maybePrepare(now time.Time, acts []Action) []Action {
	if c := t.prep.start(now, t.userSpeaking, t.agent != nil, &t.ids); c != nil {
		acts = append(acts, Action{Command: c})
	}
	return acts
}

// withdraw drops the preparation: the user went on, or said something else.
func (t *Policy) withdraw(acts []Action, reason string) []Action {
	if c := t.prep.withdraw(&t.ids, reason); c != nil {
		acts = append(acts, Action{Command: c})
	}
	return acts
}

// settle picks the state after a turn ended or an utterance turned out to be nothing.
func (t *Policy) settle(acts []Action) []Action {
	switch {
	case t.userSpeaking && t.agentActive():
		return t.setState(Overlap, acts)
	case t.userSpeaking:
		return t.setState(UserSpeaking, acts)
	case t.agentActive() && t.agent.audible:
		return t.setState(AgentSpeaking, acts)
	case t.agentActive():
		return t.setState(SilenceAfterUser, acts)
	case t.agentSpokeLast:
		return t.setState(SilenceAfterAgent, acts)
	default:
		return t.setState(Idle, acts)
	}
}

func (t *Policy) setState(s State, acts []Action) []Action {
	if s == t.state {
		return acts
	}
	from := t.state
	t.state = s
	return append(acts, Action{State: &StateChange{From: from, To: s, TurnID: t.AgentTurn()}})
}

// command appends a command about agent turn turn.
func command(acts []Action, action control.Action, turn int, reason string) []Action {
	return append(acts, Action{Command: &control.Command{Action: action, TurnID: turn, Reason: reason}})
}
