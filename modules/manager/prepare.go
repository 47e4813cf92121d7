package manager

import (
	"strings"
	"time"
)

// preparation is a reply asked for ahead: the user had paused, and the agent prepares its
// answer to the words so far, unheard, while the end of the user's turn is decided.
type preparation struct {
	userTurn, agentTurn int
	text                string
	audioQueued         bool
	lastQueued          bool
}

// prepareDue reports whether a reply may be prepared now that the user is silent: the
// feature is on, no agent turn or preparation is under way, and there are words to answer.
func (t *Turns) prepareDue() bool {
	return t.cfg.Prepare.After > 0 && t.prep == nil && t.agent == nil && !t.silentSince().IsZero() && len(t.words) > 0
}

// silentSince returns when the user's speech ended, or will have ended if the pause the
// VAD reported holds; zero while they speak.
func (t *Turns) silentSince() time.Time {
	if t.userSpeaking {
		return t.pausedAt
	}
	return t.speechEndAt
}

// maybePrepare prepares the reply once the silence after the user's speech has lasted.
func (t *Turns) maybePrepare(now time.Time, acts []Action) []Action {
	if !t.prepareDue() || now.Before(t.silentSince().Add(t.cfg.Prepare.After)) {
		return acts
	}
	t.prep = &preparation{userTurn: t.newTurnID(), agentTurn: t.newTurnID(), text: strings.Join(t.words, " ")}
	return append(acts, Action{Prepare: &Prepare{TurnID: t.prep.agentTurn, Text: t.prep.text}})
}

// withdraw drops the preparation: the user went on, or said something else.
func (t *Turns) withdraw(acts []Action, reason string) []Action {
	if t.prep == nil {
		return acts
	}
	id := t.prep.agentTurn
	if t.nextTurn == id+1 {
		// Nothing was said meanwhile: the next preparation or turn takes the same ids,
		// so that the history's turns stay numbered one after the other.
		t.nextTurn = t.prep.userTurn
	}
	t.prep = nil
	return append(acts, Action{Withdraw: &ControlTurn{TurnID: id, Reason: reason}})
}

// confirm makes the preparation the agent's turn when the user's turn ended with the
// words it was prepared for, and reports whether it did.
func (t *Turns) confirm(user *AppendUser) bool {
	p := t.prep
	if p == nil || !sameWords(p.text, user.Text) {
		return false
	}
	t.prep = nil
	user.TurnID = p.userTurn
	t.agent = &agentTurn{id: p.agentTurn, inReplyTo: p.userTurn, prepared: true,
		audioQueued: p.audioQueued, lastQueued: p.lastQueued}
	return true
}

// sameWords compares transcripts as the prompt will show them (spacing aside): the
// prepared reply is the right one only for exactly those words.
func sameWords(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
}
