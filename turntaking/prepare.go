package turntaking

import (
	"strings"
	"time"

	"github.com/parley-voice/parley/control"
)

// turnIDs hands out the conversation's turn ids, one after the other.
type turnIDs struct{ next int }

func (ids *turnIDs) take() int {
	id := ids.next
	ids.next++
	return id
}

// giveBack returns the ids from first to last when none was taken since: a withdrawn
// preparation's, so that the history's turns stay numbered one after the other.
func (ids *turnIDs) giveBack(first, last int) {
	if ids.next == last+1 {
		ids.next = first
	}
}

// preparation is a reply asked for ahead: the user had paused, and the agent prepares its
// answer to the words so far, unheard, while the end of the user's turn is decided.
type preparation struct {
	userTurn, agentTurn int
	text                string
	audioQueued         bool
	lastQueued          bool
}

// preparer follows the user's words and silences to prepare replies ahead
// (PrepareConfig): it keeps the words so far, when the user's speech ended or will have
// ended, and the preparation under way.
type preparer struct {
	after time.Duration
	prep  *preparation
	// words are the user's words so far; speechEndAt is when their speech last ended
	// (zero while they speak or once their turn was taken), and pausedAt where it will
	// have ended if the pause the VAD reported holds (zero when none).
	words       []string
	speechEndAt time.Time
	pausedAt    time.Time
}

// silentSince returns when the user's speech ended, or will have ended if the pause the
// VAD reported holds; zero while they speak.
func (p *preparer) silentSince(userSpeaking bool) time.Time {
	if userSpeaking {
		return p.pausedAt
	}
	return p.speechEndAt
}

// due reports whether a reply may be prepared now that the user is silent: the feature
// is on, no agent turn (agentBusy) or preparation is under way, and there are words to
// answer. They may stop short of the speech's end (whisper's words lag the audio by up
// to a hop and a decode): the last words are often in them already, and when the decode at
// the pause brings others, the preparation is withdrawn and made again, having lost
// nothing but its tokens.
func (p *preparer) due(userSpeaking, agentBusy bool) bool {
	since := p.silentSince(userSpeaking)
	return p.after > 0 && p.prep == nil && !agentBusy && !since.IsZero() && len(p.words) > 0
}

// deadline is when the preparation would start if the silence goes on (zero: not due).
func (p *preparer) deadline(userSpeaking, agentBusy bool) time.Time {
	if !p.due(userSpeaking, agentBusy) {
		return time.Time{}
	}
	return p.silentSince(userSpeaking).Add(p.after)
}

// start prepares the reply once the silence after the user's speech has lasted; it
// returns the command, or nil.
func (p *preparer) start(now time.Time, userSpeaking, agentBusy bool, ids *turnIDs) *control.Command {
	if !p.due(userSpeaking, agentBusy) || now.Before(p.silentSince(userSpeaking).Add(p.after)) {
		return nil
	}
	p.prep = &preparation{userTurn: ids.take(), agentTurn: ids.take(), text: strings.Join(p.words, " ")}
	return &control.Command{Action: control.Prepare, TurnID: p.prep.agentTurn, Text: p.prep.text, Reason: "the user paused"}
}

// withdraw drops the preparation (the user went on, or said something else); it returns
// the command, or nil when nothing was prepared.
func (p *preparer) withdraw(ids *turnIDs, reason string) *control.Command {
	if p.prep == nil {
		return nil
	}
	id := p.prep.agentTurn
	// Nothing said meanwhile: the next preparation or turn takes the same ids.
	ids.giveBack(p.prep.userTurn, id)
	p.prep = nil
	return &control.Command{Action: control.Withdraw, TurnID: id, Reason: reason}
}

// hear takes the recogniser's words so far; it reports whether they are no longer those
// of the preparation under way.
func (p *preparer) hear(all []string) (changed bool) {
	p.words = append(p.words[:0], all...)
	return p.prep != nil && !sameWords(p.prep.text, strings.Join(p.words, " "))
}

// speechStarted forgets the silence: the user speaks.
func (p *preparer) speechStarted() { p.speechEndAt, p.pausedAt = time.Time{}, time.Time{} }

// turnTaken forgets the words and the silence: the user's utterance arrived.
func (p *preparer) turnTaken() {
	p.words, p.speechEndAt, p.pausedAt = p.words[:0], time.Time{}, time.Time{}
}

// queued records that audio of the prepared turn exists.
func (p *preparer) queued(turn int, last bool) {
	if p.prep != nil && p.prep.agentTurn == turn {
		p.prep.audioQueued = true
		p.prep.lastQueued = p.prep.lastQueued || last
	}
}

// confirm takes the preparation when the user's turn ended with the words it was
// prepared for (nil otherwise): it is the agent's turn.
func (p *preparer) confirm(text string) *preparation {
	prep := p.prep
	if prep == nil || !sameWords(prep.text, text) {
		return nil
	}
	p.prep = nil
	return prep
}

// sameWords compares transcripts as the prompt will show them (spacing aside): the
// prepared reply is the right one only for exactly those words.
func sameWords(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
}
