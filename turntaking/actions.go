package turntaking

import (
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
)

// Action is something the policy wants done. Exactly one field is set.
type Action struct {
	// Command goes to the modules that make the agent's speech: Respond, Prepare and
	// Withdraw a reply; Duck, Unduck, Pause, Resume and Interrupt its voice.
	Command *control.Command
	// Say makes the agent speak a fixed text (a re-engagement).
	Say *Say

	// BeginAgent: an agent turn is under way (it comes before the Respond or Say that
	// asks for it).
	BeginAgent *BeginAgent
	// AgentHeard: what the listener heard of the agent turn under way changed.
	AgentHeard *AgentHeard
	// CloseAgent ends the agent turn: the history keeps what it says.
	CloseAgent *CloseAgent

	// User stores a user utterance as a turn.
	User *UserTurn
	// Backchannel stores a backchannel (after the agent turn it accompanied), or says
	// that a sound over the agent was noise that nothing keeps.
	Backchannel *Backchannel

	State *StateChange
}

// Say makes the agent speak a fixed text as turn TurnID.
type Say struct {
	TurnID int
	Text   string
}

// BeginAgent: agent turn TurnID is under way.
type BeginAgent struct {
	TurnID int
	// InReplyTo is the user turn it answers (0 for a re-engagement).
	InReplyTo int
	// Fixed is the fixed text a re-engagement says ("": the LLM generates the turn).
	Fixed string
}

// AgentHeard is what the listener heard so far of agent turn TurnID.
type AgentHeard struct {
	TurnID int
	// Text is what the history would keep were the turn cut now (dialogue.HeardText of
	// the latest position heard).
	Text string
	// Start is when the listener heard the turn's first sample, End the latest (session
	// timeline).
	Start, End time.Duration
}

// UserTurn stores a user utterance as turn TurnID.
type UserTurn struct {
	TurnID int
	Text   string
	// Start and End span the user's speech on the session's timeline.
	Start, End time.Duration
}

// Backchannel is a backchannel the user gave during agent turn TurnID: it follows that
// turn in the history. Without Text it stores nothing: the utterance was noise over the
// agent (a cough the recogniser gave a word to), and is no turn either.
type Backchannel struct {
	TurnID int
	Text   string
	Sound  SoundKind
	// Start and End span the user's sound on the session's timeline.
	Start, End time.Duration
}

// CloseAgent ends agent turn TurnID: the history stores the whole turn, or for an
// interrupted one only what the listener heard (Heard), or nothing when the listener
// heard none of it.
type CloseAgent struct {
	TurnID int
	// InReplyTo is the user turn the agent answered (0 for a re-engagement).
	InReplyTo int
	// Text is the whole turn: the generated reply (trimmed), or the fixed text of a
	// re-engagement.
	Text        string
	Interrupted bool
	// Heard is where the listener stopped hearing an interrupted turn, for the history
	// to cut it there; nil when the turn was not interrupted, or the listener heard
	// nothing of it (then it is not stored at all). Its times are left to the caller,
	// which knows the session's clock (Start and End here).
	Heard *dialogue.Heard
	// Start and End are when the listener heard the turn's audio, from its first to
	// its last sample (session timeline).
	Start, End time.Duration
}

// StateChange reports the new conversation state.
type StateChange struct {
	From, To State
	TurnID   int
}
