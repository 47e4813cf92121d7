package manager

import (
	"fmt"
	"time"

	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/turntaking"
)

// TurnState is the payload of the manager's state IUs (kind "turn-state"): who is
// speaking, for consoles and timelines.
type TurnState struct {
	State     turntaking.State
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

// AgentTurn is the payload of the manager's agent-turn IUs (kind "agent-turn"), one IU
// per agent turn: ADDed when the manager asks for the turn (just before its Respond, or
// the fixed text of a re-engagement), UPDATEd as the listener hears it, and COMMITted
// when it is over, with what the history stored. Consoles show it, so that they show
// the turn as the history keeps it; the latency observer times the exchange by it.
type AgentTurn struct {
	TurnID int
	// InReplyTo is the user turn the agent answers (0 for a re-engagement).
	InReplyTo int
	// Fixed: the turn says a fixed text (a re-engagement), not a generated reply.
	Fixed bool
	// Closed: the turn is over (the COMMIT's payload), and Text is what the history
	// stored.
	Closed bool
	// Text is what the history keeps of the turn: while the IU is open, what it would
	// keep were the turn cut now (the words heard so far, dialogue.HeardText); once
	// committed, what it stored (the whole turn, or for an interrupted one only what the
	// listener heard).
	Text string
	// FullText is the whole turn as the agent generated it (or the fixed text it says);
	// set when committed, and from the start for a fixed text.
	FullText    string
	Interrupted bool
	// Stored (committed only) is false for an interrupted turn the listener heard none
	// of, and for a turn with nothing to say (the LLM failed before any text): for the
	// listener it never happened, and the history has no trace of it.
	Stored bool
	// Heard: the listener has heard some of the turn; Start is when its first sample
	// was heard and End the last so far (session timeline).
	Heard      bool
	Start, End time.Duration
}

// Kind implements iu.Payload.
func (AgentTurn) Kind() string { return "agent-turn" }

// Summary implements iu.Payload.
func (a AgentTurn) Summary() string {
	switch {
	case a.Closed && !a.Stored && a.FullText == "":
		return fmt.Sprintf("turn %d empty, not stored", a.TurnID)
	case a.Closed && !a.Stored:
		return fmt.Sprintf("turn %d unheard, not stored (generated %q)", a.TurnID, ellipsis.Cut(a.FullText, 60))
	case a.Closed && a.Interrupted:
		return fmt.Sprintf("turn %d cut to %q (generated %q)", a.TurnID, ellipsis.Cut(a.Text, 60), ellipsis.Cut(a.FullText, 60))
	case a.Closed:
		return fmt.Sprintf("turn %d %q", a.TurnID, ellipsis.Cut(a.Text, 60))
	case a.Heard:
		return fmt.Sprintf("turn %d heard so far %q", a.TurnID, ellipsis.Cut(a.Text, 60))
	case a.Fixed:
		return fmt.Sprintf("turn %d begins, to say %q", a.TurnID, ellipsis.Cut(a.FullText, 60))
	case a.InReplyTo == 0:
		return fmt.Sprintf("turn %d begins, unasked", a.TurnID)
	}
	return fmt.Sprintf("turn %d begins, in reply to %d", a.TurnID, a.InReplyTo)
}

// UserTurn is the payload of the manager's user-turn IUs (kind "user-turn", ADD and
// COMMIT in one batch): the history stored a user utterance, as a turn or as a
// backchannel — or, for a backchannel without Text, a noise over the agent that nothing
// keeps. Every utterance with words ends in one. Consoles print it, so that they show
// what the history keeps.
type UserTurn struct {
	// TurnID is the user's turn, or for a backchannel the agent turn it accompanied.
	TurnID int
	Text   string
	// Backchannel: not a turn, an acknowledgement while the agent spoke; Sound says what
	// the overlap module heard (hum, voice).
	Backchannel bool
	Sound       turntaking.SoundKind
	// Start and End span the user's speech on the session's timeline.
	Start, End time.Duration
}

// Kind implements iu.Payload.
func (UserTurn) Kind() string { return "user-turn" }

// Summary implements iu.Payload.
func (u UserTurn) Summary() string {
	if u.Backchannel && u.Text == "" {
		return fmt.Sprintf("noise (%s) during turn %d, not stored", u.Sound, u.TurnID)
	}
	if u.Backchannel {
		return fmt.Sprintf("backchannel %q (%s) during turn %d", u.Text, u.Sound, u.TurnID)
	}
	return fmt.Sprintf("user turn %d %q", u.TurnID, u.Text)
}
