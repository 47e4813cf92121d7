package manager

import (
	"strings"
	"time"

	"github.com/parley-voice/parley/dialogue"
)

// agentTurn is the one record of the agent turn under way: what was asked for and
// generated, how far its audio got, and what the listener heard of it.
type agentTurn struct {
	id int
	// inReplyTo is the user turn it answers (0: a re-engagement).
	inReplyTo int
	// fixedText is what a re-engagement says instead of a generated reply.
	fixedText string
	// prepared: the reply was prepared before the user's turn ended, and confirmed.
	prepared bool

	replied bool // the LLM's Reply arrived (a re-engagement's fixed text counts)
	reply   Reply

	audioQueued bool // some audio was produced
	lastQueued  bool // the final chunk was produced
	audible     bool // the listener hears it now
	// heard: it was audible at some point (playing, or a pause's tail), so the
	// listener may have heard some of it.
	heard bool
	// played: the speaker reported it playing; firstHeard and lastHeard are when the
	// listener heard its audio (session timeline).
	played                bool
	firstHeard, lastHeard time.Duration
	// position is where in the text the speaker's latest report put the listener.
	position *HeardWord

	finished bool // the listener heard the last chunk to its end
	// clausesHeard counts the clauses heard to their end (the highest, plus one).
	clausesHeard int
	paused       bool
	interrupted  bool
	stopped      bool // the speaker's final report after the interrupt arrived
}

// agentActive reports whether an agent turn is under way and not yet interrupted.
func (t *Turns) agentActive() bool { return t.agent != nil && !t.agent.interrupted }

func (t *Turns) handleReply(r *Reply, acts []Action) []Action {
	a := t.agent
	if a == nil || a.id != r.TurnID {
		return acts
	}
	a.replied = true
	a.reply = *r
	if !a.audioQueued && !a.interrupted && strings.TrimSpace(r.Text) == "" {
		a.finished = true // nothing to say, nothing to hear
	}
	a.checkAllHeard()
	return t.maybeCloseAgent(acts)
}

func (t *Turns) handleAudio(ev Event, acts []Action) []Action {
	h := ev.Audio
	a := t.agent
	if a == nil || a.id != h.TurnID {
		return acts
	}
	if h.Heard != nil {
		a.position = h.Heard
	}
	if h.Playing {
		if !a.played {
			a.played = true
			a.firstHeard = h.Pos
		}
		a.lastHeard = h.Pos
	}
	if h.Tail || h.Finished {
		a.lastHeard = h.Pos // the audio still coming out ends then, or the turn ended
	}
	a.audible = h.Audible()
	if a.audible {
		a.heard = true
		t.lastActivity = ev.At
		if t.state != Overlap {
			acts = t.setState(AgentSpeaking, acts)
		}
	}
	a.clausesHeard = max(a.clausesHeard, h.ClausesHeard)
	if h.Finished || (!a.finished && a.checkAllHeard()) {
		a.finished = true
		t.lastActivity = ev.At
	}
	if h.Stopped {
		a.stopped = true
	}
	return t.maybeCloseAgent(acts)
}

// checkAllHeard marks a replied turn whose committed clauses were all heard to their end
// as finished, though no chunk said it was the last (a reply cut short).
func (a *agentTurn) checkAllHeard() bool {
	if a.finished || !a.replied || a.interrupted || a.fixedText != "" || len(a.reply.Clauses) == 0 || a.clausesHeard < len(a.reply.Clauses) {
		return false
	}
	a.finished, a.lastQueued = true, true
	return true
}

// maybeCloseAgent stores the agent turn once everything about it is known.
func (t *Turns) maybeCloseAgent(acts []Action) []Action {
	a := t.agent
	if a == nil {
		return acts
	}
	done := false
	switch {
	case a.interrupted:
		// The reply text and the speaker's final report are both needed to cut the turn.
		done = a.replied && (a.stopped || !a.heard)
	case t.pendingUser != nil:
		// The user spoke after the agent's turn without interrupting it.
		done = a.replied && (a.finished || !a.audioQueued)
	default:
		done = a.replied && a.finished && (a.lastQueued || !a.audioQueued)
	}
	if !done {
		return acts
	}
	t.agent = nil
	t.barge = nil
	acts = append(acts, Action{CloseAgent: a.close()})
	acts = t.flushBackchannels(acts)
	t.agentSpokeLast = a.heard || !a.interrupted
	if u := t.pendingUser; u != nil {
		t.pendingUser = nil
		return t.startReply(u, acts)
	}
	return t.settle(acts)
}

// close says how the history keeps the turn.
func (a *agentTurn) close() *CloseAgent {
	c := &CloseAgent{TurnID: a.id, InReplyTo: a.inReplyTo, Text: strings.TrimSpace(a.reply.Text),
		Interrupted: a.interrupted, Start: a.firstHeard, End: a.lastHeard}
	if a.fixedText != "" {
		c.Text = a.fixedText
	}
	if a.interrupted && a.played && a.position != nil {
		// Only what the listener heard: up to the word the speaker last reported.
		clauses := a.reply.Clauses
		if a.fixedText != "" {
			clauses = []string{a.fixedText}
		}
		p := a.position
		c.Heard = &dialogue.Heard{Position: dialogue.Position{TurnID: a.id, ClauseID: p.ClauseID,
			WordStart: p.Start, WordEnd: p.End, WordFraction: p.Fraction}, Clauses: clauses}
	}
	return c
}
