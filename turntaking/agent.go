package turntaking

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
	// audibleAt is when (clock time) the listener first heard it (zero: not yet).
	audibleAt time.Time
	// position is where in the text the speaker's latest report put the listener, and
	// spoken the texts of the clauses the reports named, by clause id.
	position *dialogue.Position
	spoken   []string
	// shown is the heard text last reported (AgentHeard), shownAny whether one was.
	shown    string
	shownAny bool

	finished bool // the listener heard the last chunk to its end
	// clausesHeard counts the clauses heard to their end (the highest, plus one).
	clausesHeard int
	paused       bool
	interrupted  bool
	stopped      bool // the speaker's final report after the interrupt arrived
}

// newUnprompted returns the record of a turn that answers no user turn (a re-engagement,
// a request to say something again): a fixed text, or (text "") a turn the LLM
// generates.
func newUnprompted(id int, text string) *agentTurn {
	if text == "" {
		return &agentTurn{id: id}
	}
	return &agentTurn{id: id, fixedText: text, replied: true, reply: Reply{TurnID: id, Text: text}}
}

// begin is the action announcing the turn.
func (a *agentTurn) begin() Action {
	return Action{BeginAgent: &BeginAgent{TurnID: a.id, InReplyTo: a.inReplyTo, Fixed: a.fixedText}}
}

// takeReply records the LLM's reply.
func (a *agentTurn) takeReply(r *Reply) {
	a.replied = true
	a.reply = *r
	if !a.audioQueued && !a.interrupted && strings.TrimSpace(r.Text) == "" {
		a.finished = true // nothing to say, nothing to hear
	}
	a.checkAllHeard()
}

// queued records that audio of the turn exists.
func (a *agentTurn) queued(last bool) {
	a.audioQueued = true
	a.lastQueued = a.lastQueued || last
}

// hear takes the speaker's report; it reports whether the turn was heard to its end by
// it.
func (a *agentTurn) hear(at time.Time, h *AudioHeard) (finishedNow bool) {
	if p := h.Heard; p != nil {
		a.position = p
		for len(a.spoken) <= p.ClauseID {
			a.spoken = append(a.spoken, "")
		}
		if p.ClauseID >= 0 {
			a.spoken[p.ClauseID] = p.Clause
		}
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
		if !a.heard {
			a.audibleAt = at
		}
		a.heard = true
	}
	a.clausesHeard = max(a.clausesHeard, h.ClausesHeard)
	if h.Finished || (!a.finished && a.checkAllHeard()) {
		a.finished = true
		finishedNow = true
	}
	if h.Stopped {
		a.stopped = true
	}
	return finishedNow
}

// says reports whether word (normalised) is one of the words of the clauses the speaker
// has played so far (the one playing included). A nil turn says nothing.
func (a *agentTurn) says(word string) bool {
	if a == nil {
		return false
	}
	for _, clause := range a.spoken {
		for _, w := range strings.Fields(clause) {
			if normalizeWord(w) == word {
				return true
			}
		}
	}
	return false
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

// heardChange returns what the listener heard so far, cut as the history would cut it
// (cut), when it changed since last reported; nil when it did not, or nothing was
// played yet.
func (a *agentTurn) heardChange(cut dialogue.AlignOptions) *AgentHeard {
	if !a.played {
		return nil
	}
	text := a.shown
	if p := a.position; p != nil && p.ClauseID >= 0 {
		if t, err := dialogue.HeardText(a.spoken[:p.ClauseID+1], *p, cut); err == nil {
			text = t
		}
	}
	if a.shownAny && text == a.shown {
		return nil
	}
	a.shown, a.shownAny = text, true
	return &AgentHeard{TurnID: a.id, Text: text, Start: a.firstHeard, End: a.lastHeard}
}

// done reports whether everything about the turn is known, so that it can be closed;
// userWaits says the user spoke after it without interrupting it.
func (a *agentTurn) done(userWaits bool) bool {
	switch {
	case a.interrupted:
		// The reply text and the speaker's final report are both needed to cut the turn.
		return a.replied && (a.stopped || !a.heard)
	case userWaits:
		return a.replied && (a.finished || !a.audioQueued)
	default:
		return a.replied && a.finished && (a.lastQueued || !a.audioQueued)
	}
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
		p := *a.position
		p.TurnID = a.id
		c.Heard = &dialogue.Heard{Position: p, Clauses: clauses}
	}
	return c
}
