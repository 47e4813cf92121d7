package turntaking

import (
	"time"

	"github.com/parley-voice/parley/control"
)

// The policy's side of a barge-in: it begins one at the user's first sound over the
// agent, holds the agent's voice meanwhile, and carries out what the barge-in decides
// (interrupt, hold, release, resume, settle).

func (t *Policy) candidate(c *Candidate, acts []Action) []Action {
	if !t.agentActive() || !t.cfg.BargeIn.Enabled || t.barge != nil {
		return acts
	}
	// Hold the agent's voice at the first sound of the user; the candidate is confirmed
	// or withdrawn within the VAD's minimum speech duration.
	t.beginBargeIn(c.Onset, true)
	return t.hold(acts, "possible user speech")
}

// beginBargeIn starts weighing a sound of the user's over the agent that began at onset.
// A voice that follows closely on one that did not interrupt the same agent turn goes on
// with it (backchannels.rejoin).
func (t *Policy) beginBargeIn(onset time.Time, tentative bool) {
	b := newBargeIn(t.cfg.BargeIn, t.lex, onset, t.agent, tentative)
	if from, comebacks, ok := t.backs.rejoin(t.AgentTurn(), onset); ok {
		b.from, b.comebacks = from, comebacks
		if onset.After(from) {
			b.comebacks++ // not the same sound's evidence coming after its withdrawal
		}
	}
	t.barge = b
}

// keepDroppedVoice keeps a voice the VAD withdrew as too short for a sound that follows
// it closely (backchannels.rejoin): an echo canceller's suppressor cuts the first word of
// a barge-in short ("go" of "go forward ten meters"), and the VAD drops it just as the
// rest begins. Its end is as far as it was decoded, or where it stopped.
func (t *Policy) keepDroppedVoice(b *bargeIn) {
	s := b.sound
	if s == nil || s.Kind != SoundVoice || t.agent == nil {
		return
	}
	end := s.Onset.Add(s.DecodedTo)
	if s.Ended && s.End.After(end) {
		end = s.End
	}
	t.backs.keepVoice(t.agent.id, b.from, end, b.comebacks)
}

// handleSound takes the overlap module's evidence.
func (t *Policy) handleSound(ev Event, acts []Action) []Action {
	s := ev.Sound
	b := t.barge
	if b == nil {
		if !t.agentActive() || !t.cfg.BargeIn.Enabled || s.Final || s.Dropped || s.Ended {
			return acts
		}
		// Evidence of a sound the VAD's candidate did not announce here (the agent
		// became audible in between): a barge-in all the same.
		t.beginBargeIn(s.Onset, true)
		b = t.barge
		acts = t.hold(acts, "user sound over the agent")
	}
	if b.resolved {
		return acts
	}
	b.hearSound(s)
	return t.evaluateBargeIn(ev.At, acts)
}

// evaluateBargeIn lets the barge-in under way decide at now, and carries it out.
func (t *Policy) evaluateBargeIn(now time.Time, acts []Action) []Action {
	b := t.barge
	if b == nil || b.resolved {
		return acts
	}
	if !t.agentActive() {
		b.resolved = true // nothing left to interrupt or resume
		return acts
	}
	return t.carryOut(b.decide(now), acts)
}

// decideOnUtterance settles a barge-in with the final transcript of the speech.
func (t *Policy) decideOnUtterance(words []string, acts []Action) []Action {
	b := t.barge
	if b == nil || b.resolved || !t.agentActive() {
		return acts
	}
	return t.carryOut(b.decideOnTranscript(words), acts)
}

func (t *Policy) carryOut(d decision, acts []Action) []Action {
	switch d.outcome {
	case interrupt:
		return t.interrupt(acts, d.reason)
	case hold:
		return t.hold(acts, d.reason)
	case release:
		return t.release(acts, d.reason)
	case resume:
		return t.resume(acts, d.reason)
	case settle:
		return t.settleSound(acts, d.reason)
	}
	return acts
}

// hold softens (Hold "duck") or pauses the agent's voice for the barge-in under way.
func (t *Policy) hold(acts []Action, reason string) []Action {
	b, a := t.barge, t.agent
	if b == nil || b.held || a == nil {
		return acts
	}
	b.held = true
	if t.cfg.BargeIn.Hold == HoldPause {
		a.paused = true
		return command(acts, control.Pause, a.id, reason)
	}
	return append(acts, Action{Command: &control.Command{Action: control.Duck, TurnID: a.id, Gain: t.cfg.BargeIn.DuckGain, Reason: reason}})
}

// release lets the agent's voice go on as before the barge-in.
func (t *Policy) release(acts []Action, reason string) []Action {
	b, a := t.barge, t.agent
	if b == nil || !b.held || a == nil {
		return acts
	}
	b.held = false
	if a.paused {
		a.paused = false
		return command(acts, control.Resume, a.id, reason)
	}
	if !a.interrupted {
		return command(acts, control.Unduck, a.id, reason)
	}
	return acts
}

func (t *Policy) interrupt(acts []Action, reason string) []Action {
	a, b := t.agent, t.barge
	b.resolved = true
	b.held = false
	t.backs.interrupted(a.id, b)
	a.interrupted = true
	a.paused = false
	acts = append(acts, Action{Command: &control.Command{Action: control.Interrupt, TurnID: a.id, Reason: reason, UserKeptTurn: b.keepsUserTurn()}})
	return t.setState(Overlap, acts)
}

// resume ends a barge-in that was no interruption: the agent's voice goes on.
func (t *Policy) resume(acts []Action, reason string) []Action {
	a := t.agent
	acts = t.release(acts, reason)
	t.barge.resolved = true
	t.barge = nil
	if t.userSpeaking {
		return t.setState(Overlap, acts)
	}
	if a.audible || a.audioQueued {
		return t.setState(AgentSpeaking, acts)
	}
	return t.settle(acts)
}

// settleSound ends a barge-in that the overlap module's evidence found no interruption:
// the voice comes back, and what the sound was is kept for its transcript.
func (t *Policy) settleSound(acts []Action, reason string) []Action {
	b := t.barge
	if b.sound.Dropped {
		// The VAD withdrew it: no transcript comes for it to judge, and a verdict kept
		// would judge the next one, perhaps the user's turn after the agent's. A voice is
		// kept all the same for what follows it closely.
		t.keepDroppedVoice(b)
		return t.resume(acts, reason)
	}
	id := t.agent.id
	acts = t.resume(acts, reason)
	t.backs.settle(id, b)
	return acts
}
