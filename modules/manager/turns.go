// Package manager is the turn-taking dialogue manager: it follows user speech (VAD, ASR),
// the agent's reply (LLM, TTS) and what the listener hears (speaker), decides when the
// agent answers, pauses, resumes or is interrupted, and keeps the dialogue history true
// to what was said and heard.
//
// The decisions live in Turns, a clock-free state machine: events in, actions out. It
// keeps the one record of the agent turn under way (agent.go), weighs barge-ins
// (bargein.go) and tracks who is speaking. The Module adapts IUs to events and actions to
// IUs and history operations, so the policy can be tested on scripted event sequences;
// LatencyObserver times each exchange from the IUs without taking part in it.
package manager

import (
	"strings"
	"time"
)

// Turns is the turn-taking state machine. It is not safe for concurrent use: the
// manager module's goroutine owns it.
type Turns struct {
	cfg   Config
	backs map[string]bool
	// backWords holds every word of the backchannels ("i" and "see" of "i see"), and
	// interrupts the interrupt words.
	backWords, interrupts map[string]bool
	// longestInterrupt is the most words an interrupt phrase has.
	longestInterrupt int

	state    State
	nextTurn int

	userSpeaking bool
	// overlapUtterance marks the utterance in progress as begun over the agent; if it
	// only holds backchannels it is not a turn.
	overlapUtterance bool

	agent *agentTurn
	barge *bargeIn
	// verdict is what the sounds over the agent since the last transcript were, when
	// they did not interrupt it, for the transcript that follows (one transcript may
	// span several sounds); pendingBackchannels wait for their agent turn to be stored.
	verdict             *verdict
	pendingBackchannels []*AppendBackchannel
	// settled is the last voice over the agent that did not interrupt it (nil: none, or
	// a sound began since); piece the last transcript of one kept as a backchannel for
	// want of words (nil: none, or a transcript came since).
	settled *settledVoice
	piece   *piece
	// carried is the transcript of such a piece when the voice that went on with it
	// interrupted the agent: it opens the user's turn.
	carried *Utterance
	// prep is the reply being prepared while the user is silent; words are the user's
	// words so far and speechEndAt when their speech last ended (zero while they speak
	// or once their turn was taken).
	prep        *preparation
	words       []string
	speechEndAt time.Time
	// pausedAt is where the user's speech will have ended if the pause the VAD reported
	// holds (zero when none): a reply may be prepared from then on.
	pausedAt time.Time
	// pendingUser holds a user utterance that arrived before the agent turn was closed;
	// it is stored right after, to keep the history in order.
	pendingUser *AppendUser

	lastActivity time.Time
	reengaged    int
	// agentSpokeLast tells, when nobody speaks, whether that silence follows the agent.
	agentSpokeLast bool
}

// NewTurns returns a state machine with cfg.
func NewTurns(cfg Config) *Turns {
	t := &Turns{cfg: cfg, backs: map[string]bool{}, backWords: map[string]bool{}, interrupts: map[string]bool{}, nextTurn: 1}
	backs, interrupts := cfg.BargeIn.WordLists()
	for _, b := range backs {
		t.backs[normalizeWord(b)] = true
		for _, w := range strings.Fields(b) {
			t.backWords[normalizeWord(w)] = true
		}
	}
	for _, w := range interrupts {
		// A phrase ("hold on") is matched word by word (interruptAt).
		var parts []string
		for _, f := range strings.Fields(w) {
			if nf := normalizeWord(f); nf != "" {
				parts = append(parts, nf)
			}
		}
		if len(parts) == 0 {
			continue
		}
		t.interrupts[strings.Join(parts, " ")] = true
		t.longestInterrupt = max(t.longestInterrupt, len(parts))
	}
	return t
}

// State returns the current conversation state.
func (t *Turns) State() State { return t.state }

// AgentTurn returns the agent turn under way (0 when none).
func (t *Turns) AgentTurn() int {
	if t.agent == nil {
		return 0
	}
	return t.agent.id
}

// Deadline returns when Tick must next be called (zero: no deadline).
func (t *Turns) Deadline() time.Time {
	var d time.Time
	if b := t.barge; b != nil && !b.resolved && t.agentActive() {
		d = t.bargeDeadline(b)
	}
	if t.reengageDue() {
		rd := t.lastActivity.Add(t.cfg.Reengage.After)
		if d.IsZero() || rd.Before(d) {
			d = rd
		}
	}
	if t.prepareDue() {
		pd := t.silentSince().Add(t.cfg.Prepare.After)
		if d.IsZero() || pd.Before(d) {
			d = pd
		}
	}
	return d
}

// reengageDue reports whether the agent will speak up if the silence goes on.
func (t *Turns) reengageDue() bool {
	r := t.cfg.Reengage
	return r.After > 0 && t.state == SilenceAfterAgent && t.agent == nil && t.reengaged < max(r.Max, 1) && !t.lastActivity.IsZero()
}

// Tick lets deadlines take effect at time now.
func (t *Turns) Tick(now time.Time) []Action {
	var acts []Action
	if t.barge != nil && !t.barge.resolved {
		acts = t.evaluateBargeIn(now, acts)
	}
	acts = t.maybePrepare(now, acts)
	if r := t.cfg.Reengage; t.reengageDue() && !now.Before(t.lastActivity.Add(r.After)) {
		t.reengaged++
		t.lastActivity = now
		id := t.newTurnID()
		if r.Text != "" {
			t.agent = &agentTurn{id: id, fixedText: r.Text, replied: true, reply: Reply{TurnID: id, Text: r.Text}}
			acts = append(acts, Action{Say: &Say{TurnID: id, Text: r.Text}})
		} else {
			t.agent = &agentTurn{id: id}
			acts = append(acts, Action{Respond: &Respond{TurnID: id, Reason: "re-engage after silence"}})
		}
		acts = t.setState(SilenceAfterUser, acts)
	}
	return acts
}

func (t *Turns) newTurnID() int {
	id := t.nextTurn
	t.nextTurn++
	return id
}

// Handle applies one event and returns what to do.
func (t *Turns) Handle(ev Event) []Action {
	var acts []Action
	switch {
	case ev.Candidate != nil:
		acts = t.candidate(ev.Candidate, acts)
	case ev.CandidateDropped != nil:
		if b := t.barge; b != nil && b.tentative && !b.resolved && t.agent != nil {
			acts = t.resume(acts, "noise, not speech")
		}
		if c := t.carried; c != nil && !t.userSpeaking {
			// The sound that interrupted was too short to be speech, and leaves no
			// transcript: the piece before it is the user's turn.
			acts = t.handleUtterance(Event{At: ev.At, Utterance: &Utterance{}}, acts)
		}
	case ev.SpeechStart != nil:
		acts = t.speechStart(ev, acts)
	case ev.SpeechPause != nil:
		if t.userSpeaking {
			t.pausedAt = ev.SpeechPause.End
			acts = t.maybePrepare(ev.At, acts)
		}
	case ev.SpeechResume != nil:
		if !t.pausedAt.IsZero() {
			t.pausedAt = time.Time{}
			acts = t.withdraw(acts, "the user goes on")
		}
	case ev.SpeechEnd != nil:
		t.pausedAt = time.Time{}
		t.userSpeaking = false
		t.lastActivity = ev.At
		t.speechEndAt = ev.SpeechEnd.End
		if b := t.barge; b != nil && !b.resolved {
			b.open = false
			b.ended = ev.SpeechEnd.End
			acts = t.evaluateBargeIn(ev.At, acts)
		}
		if t.state == UserSpeaking {
			acts = t.setState(SilenceAfterUser, acts)
		}
		acts = t.maybePrepare(ev.At, acts)
	case ev.Words != nil:
		if b := t.barge; b != nil && !b.resolved {
			b.realWords = t.realWords(ev.Words.Words)
			acts = t.evaluateBargeIn(ev.At, acts)
		}
		t.words = append(t.words[:0], ev.Words.All...)
		if p := t.prep; p != nil && !sameWords(p.text, strings.Join(t.words, " ")) {
			acts = t.withdraw(acts, "the words changed")
		}
		acts = t.maybePrepare(ev.At, acts)
	case ev.EndOfTurn != nil:
		t.lastActivity = ev.At
	case ev.Utterance != nil:
		acts = t.handleUtterance(ev, acts)
	case ev.Reply != nil:
		acts = t.handleReply(ev.Reply, acts)
	case ev.AudioQueued != nil:
		if a := t.agent; a != nil && a.id == ev.AudioQueued.TurnID {
			a.audioQueued = true
			a.lastQueued = a.lastQueued || ev.AudioQueued.Last
		}
		if p := t.prep; p != nil && p.agentTurn == ev.AudioQueued.TurnID {
			p.audioQueued = true
			p.lastQueued = p.lastQueued || ev.AudioQueued.Last
		}
	case ev.Audio != nil:
		acts = t.handleAudio(ev, acts)
	case ev.Sound != nil:
		acts = t.handleSound(ev, acts)
	}
	return acts
}

func (t *Turns) speechStart(ev Event, acts []Action) []Action {
	if b := t.barge; b != nil && b.tentative && !b.resolved {
		// The candidate that paused the agent is confirmed speech.
		b.tentative = false
		b.onset = ev.SpeechStart.Onset
		t.userSpeaking = true
		t.lastActivity = ev.At
		t.overlapUtterance = true
		acts = t.setState(Overlap, acts)
		return t.evaluateBargeIn(ev.At, acts)
	}
	t.userSpeaking = true
	t.lastActivity = ev.At
	t.speechEndAt, t.pausedAt = time.Time{}, time.Time{}
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

func (t *Turns) handleUtterance(ev Event, acts []Action) []Action {
	text := strings.TrimSpace(ev.Utterance.Text)
	overlap := t.overlapUtterance
	t.overlapUtterance = false
	t.lastActivity = ev.At
	t.words, t.speechEndAt, t.pausedAt = t.words[:0], time.Time{}, time.Time{}
	acts = t.decideOnUtterance(strings.Fields(text), acts)
	carried := t.carried
	t.carried = nil
	if text == "" && carried != nil {
		// The sound that interrupted has no words; the piece before it has.
		ev.Utterance, text, carried = carried, strings.TrimSpace(carried.Text), nil
	}
	if text == "" {
		t.verdict = nil
		// Noise: no turn. Fall back to what the agent is doing.
		acts = t.withdraw(acts, "no words after all")
		return t.settle(acts)
	}
	u := ev.Utterance
	bc, ok, joined := t.backchannelOf(u, overlap)
	if ok {
		// "mm-hmm" over the agent is not a turn: the agent went on (or will), and the
		// history keeps it as a backchannel after the agent's turn.
		return t.recordBackchannel(bc, acts)
	}
	if joined == nil && carried != nil {
		joined = joinUtterances(carried, u)
	}
	if joined != nil {
		u, text = joined, joined.Text
	}
	t.reengaged = 0
	user := &AppendUser{Text: text, Start: u.Start, End: u.End}
	if t.agent == nil && t.confirm(user) {
		// The reply prepared for exactly these words is the answer: it plays at once.
		acts = append(acts, Action{AppendUser: user})
		t.agentSpokeLast = false
		acts = append(acts, Action{Respond: &Respond{TurnID: t.agent.id, Reason: "user turn ended (reply prepared)"}})
		return t.setState(SilenceAfterUser, acts)
	}
	acts = t.withdraw(acts, "the turn ended with other words")
	user.TurnID = t.newTurnID()
	if t.agent != nil {
		// The agent turn must be closed before the user's words follow it in the
		// history: an interrupted one with what was heard, one the user did not
		// interrupt (its last words were playing, say) with everything it said.
		t.pendingUser = user
		return t.maybeCloseAgent(acts)
	}
	return t.startReply(user, acts)
}

func (t *Turns) startReply(user *AppendUser, acts []Action) []Action {
	acts = append(acts, Action{AppendUser: user})
	t.agentSpokeLast = false
	id := t.newTurnID()
	t.agent = &agentTurn{id: id, inReplyTo: user.TurnID}
	acts = append(acts, Action{Respond: &Respond{TurnID: id, Reason: "user turn ended"}})
	return t.setState(SilenceAfterUser, acts)
}

// settle picks the state after a turn ended or an utterance turned out to be nothing.
func (t *Turns) settle(acts []Action) []Action {
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

func (t *Turns) setState(s State, acts []Action) []Action {
	if s == t.state {
		return acts
	}
	from := t.state
	t.state = s
	return append(acts, Action{State: &StateChange{From: from, To: s, TurnID: t.AgentTurn()}})
}
