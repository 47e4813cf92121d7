package manager

import (
	"strings"
	"time"
	"unicode"
)

// bargeIn is a barge-in under evaluation: a sound of the user's over the agent.
type bargeIn struct {
	onset time.Time
	// from is when the voice began that this sound goes on with: the onset of an earlier
	// sound over the same agent turn that it follows closely (Evidence.Rejoin), else
	// onset. Its length past MaxBackchannel counts from there.
	from      time.Time
	tentative bool // begun by a candidate that the VAD has not confirmed yet
	open      bool // the user is still speaking
	ended     time.Time
	// realWords counts the words of the latest stable hypothesis that are not
	// backchannels.
	realWords  int
	minReached bool // the speech lasted the minimum duration
	resolved   bool
	// held: the agent's voice is held for it (ducked, or paused with Hold "pause").
	held bool
	// sound is the overlap module's latest evidence about it, prev and prev2 the two
	// decodes before (nil: no evidence, the recogniser's words decide as without the
	// module).
	sound       *OverlapSound
	prev, prev2 []ScoredWord
	// longChecked: the MaxBackchannel deadline has been looked at.
	longChecked bool
	// comebacks counts the times the sound went on after it had ended.
	comebacks int
}

func (t *Turns) candidate(c *Candidate, acts []Action) []Action {
	if !t.agentActive() || !t.cfg.BargeIn.Enabled || t.barge != nil {
		return acts
	}
	// Hold the agent's voice at the first sound of the user; the candidate is confirmed
	// or withdrawn within the VAD's minimum speech duration.
	t.beginBargeIn(c.Onset, true)
	return t.hold(acts, "possible user speech")
}

// beginBargeIn starts weighing a sound of the user's over the agent that began at onset.
// A voice that follows closely on one that did not interrupt the same agent turn
// (within Evidence.Rejoin of its end) goes on with it: an echo canceller cuts speech
// over the agent into pieces ("go forward ten meters" as "go for…" and "…ten
// meters", 230 ms apart), each of them too short, and too garbled, to interrupt alone.
func (t *Turns) beginBargeIn(onset time.Time, tentative bool) {
	b := &bargeIn{onset: onset, from: onset, open: true, tentative: tentative}
	if p := t.settled; p != nil && t.agent != nil && p.agentTurn == t.agent.id &&
		!onset.After(p.end.Add(t.cfg.BargeIn.Evidence.Rejoin)) {
		b.from, b.comebacks = p.from, p.comebacks+1
	}
	t.settled = nil
	t.barge = b
}

// hold softens (Hold "duck") or pauses the agent's voice for the barge-in under way.
func (t *Turns) hold(acts []Action, reason string) []Action {
	b, a := t.barge, t.agent
	if b == nil || b.held || a == nil {
		return acts
	}
	b.held = true
	if t.cfg.BargeIn.Hold == HoldPause {
		a.paused = true
		return append(acts, Action{Pause: &ControlTurn{TurnID: a.id, Reason: reason}})
	}
	return append(acts, Action{Duck: &Duck{TurnID: a.id, Gain: t.cfg.BargeIn.DuckGain, Reason: reason}})
}

// release lets the agent's voice go on as before the barge-in.
func (t *Turns) release(acts []Action, reason string) []Action {
	b, a := t.barge, t.agent
	if b == nil || !b.held || a == nil {
		return acts
	}
	b.held = false
	if a.paused {
		a.paused = false
		return append(acts, Action{Resume: &ControlTurn{TurnID: a.id, Reason: reason}})
	}
	if !a.interrupted {
		return append(acts, Action{Unduck: &ControlTurn{TurnID: a.id, Reason: reason}})
	}
	return acts
}

// bargeDeadline is when a barge-in under evaluation must be looked at again: when its
// minimum duration is reached, when it has become too long to be a backchannel, or when
// the wait for its transcript is over.
func (t *Turns) bargeDeadline(b *bargeIn) time.Time {
	cfg := t.cfg.BargeIn
	if b.sound != nil {
		if cfg.MaxBackchannel > 0 && !b.longChecked && b.sound.Kind != SoundHum {
			return b.from.Add(cfg.MaxBackchannel)
		}
		return time.Time{} // the evidence comes as it comes
	}
	if b.tentative {
		return time.Time{} // the VAD confirms or withdraws it
	}
	if !b.open {
		return b.ended.Add(cfg.Grace)
	}
	if !b.minReached {
		return b.onset.Add(cfg.MinDuration)
	}
	if cfg.MaxBackchannel > 0 {
		return b.onset.Add(cfg.MaxBackchannel)
	}
	return time.Time{}
}

func (t *Turns) evaluateBargeIn(now time.Time, acts []Action) []Action {
	b := t.barge
	a := t.agent
	if b == nil || b.resolved {
		return acts
	}
	if a == nil || a.interrupted {
		b.resolved = true // nothing left to interrupt or resume
		return acts
	}
	if b.sound != nil {
		return t.weighSound(now, acts)
	}
	if b.tentative {
		return acts // not speech yet
	}
	cfg := t.cfg.BargeIn
	end := now
	if !b.open {
		end = b.ended
	}
	dur := end.Sub(b.onset)
	b.minReached = b.minReached || dur >= cfg.MinDuration
	switch {
	case b.minReached && cfg.MinWords > 0 && cfg.EarlyWords > 0 && b.realWords >= max(cfg.MinWords, cfg.EarlyWords),
		b.minReached && cfg.MinWords == 0,
		cfg.MaxBackchannel > 0 && dur >= cfg.MaxBackchannel:
		return t.interrupt(acts, "barge-in")
	case !b.open && !now.Before(b.ended.Add(cfg.Grace)):
		// The user stopped and no transcript came to say otherwise: a cough, noise.
		return t.resume(acts, "false barge-in")
	}
	return acts
}

// decideOnUtterance settles a barge-in with the final transcript of the speech.
func (t *Turns) decideOnUtterance(words []string, acts []Action) []Action {
	b := t.barge
	if b == nil || b.resolved || t.agent == nil || t.agent.interrupted {
		return acts
	}
	if b.sound != nil {
		// The evidence did not find an interruption while the agent spoke; the agent went
		// on, and a late transcript does not stop it (the words may still be a turn of
		// their own, after the agent's: see backchannelOf).
		return t.settleSound(acts, "no interruption in the transcript's time")
	}
	cfg := t.cfg.BargeIn
	if b.minReached && t.realWords(words) >= max(cfg.MinWords, 1) {
		return t.interrupt(acts, "barge-in (final transcript)")
	}
	return t.resume(acts, "backchannel or noise")
}

func (t *Turns) interrupt(acts []Action, reason string) []Action {
	a := t.agent
	t.barge.resolved = true
	t.barge.held = false
	t.verdict = nil // the utterance is a turn, whatever its sounds before were
	if p := t.piece; p != nil && p.agentTurn == a.id && t.barge.from.Before(t.barge.onset) && t.unpend(p.bc) {
		// The voice this one went on with was kept as a backchannel: it is speech.
		t.carried = p.u
	}
	t.piece = nil
	a.interrupted = true
	a.paused = false
	acts = append(acts, Action{Interrupt: &ControlTurn{TurnID: a.id, Reason: reason}})
	return t.setState(Overlap, acts)
}

func (t *Turns) resume(acts []Action, reason string) []Action {
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

// realWords counts the words that are not backchannels.
func (t *Turns) realWords(words []string) int {
	// Multi-word backchannels ("i see") are matched on the whole hypothesis too.
	if len(words) > 0 && t.backs[normalizeWord(strings.Join(words, " "))] {
		return 0
	}
	n := 0
	for _, w := range words {
		if nw := normalizeWord(w); nw != "" && !t.backs[nw] {
			n++
		}
	}
	return n
}

func (t *Turns) onlyBackchannels(words []string) bool { return t.realWords(words) == 0 }

// normalizeWord lowercases and strips punctuation other than inner hyphens and
// apostrophes, so "Mm-hmm," matches "mm-hmm".
func normalizeWord(w string) string {
	w = strings.ToLower(strings.TrimSpace(w))
	w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return strings.Join(strings.Fields(w), " ")
}
