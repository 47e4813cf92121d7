package manager

import (
	"time"

	"github.com/parley-voice/parley/dialogue"
)

// Event is something the manager learns. Exactly one of the pointer fields is set.
type Event struct {
	At time.Time

	Candidate        *Candidate
	CandidateDropped *CandidateDropped
	SpeechStart      *SpeechStart
	SpeechEnd        *SpeechEnd
	SpeechPause      *SpeechPause
	SpeechResume     *SpeechResume
	EndOfTurn        *EndOfTurn
	Words            *Words
	Utterance        *Utterance
	Reply            *Reply
	Audio            *AudioHeard
	AudioQueued      *AudioQueued
	Sound            *OverlapSound
}

// Candidate: the VAD heard what may be the start of user speech (before confirming it).
type Candidate struct {
	Onset time.Time
}

// CandidateDropped: the possible speech was noise.
type CandidateDropped struct{}

// SpeechStart: the VAD confirmed user speech; Onset is when it began (clock time).
type SpeechStart struct {
	Onset time.Time
}

// SpeechEnd: the user's speech segment ended at End (clock time).
type SpeechEnd struct {
	End time.Time
}

// SpeechPause: the user's speech stopped and the segment will end at End (clock time)
// unless it resumes (SpeechResume); SpeechEnd confirms it. Only the preparation of a
// reply takes it into account: it may start then.
type SpeechPause struct {
	End time.Time
}

// SpeechResume: the user's speech went on after a SpeechPause.
type SpeechResume struct{}

// EndOfTurn: the user's turn ended (silence long enough after speech).
type EndOfTurn struct {
	SpeechEnd time.Time
}

// Words is the ASR's current hypothesis for the utterance in progress: the words stable
// enough to count for a barge-in, and all of them (what a reply is prepared for).
type Words struct {
	Words []string
	All   []string
}

// Utterance is the user's final, committed utterance.
type Utterance struct {
	Text string
	// Words are its words with the recogniser's confidence (0 when it gives none).
	Words []ScoredWord
	// Start and End span the user's speech on the session's timeline.
	Start, End time.Duration
}

// Reply: the LLM finished (or stopped) generating agent turn TurnID.
type Reply struct {
	TurnID int
	Text   string
	// Clauses are the texts of the committed clauses, in order: what the TTS speaks,
	// and what an interrupted turn is cut back from.
	Clauses     []string
	Interrupted bool
	Err         error
}

// AudioQueued: agent audio for TurnID exists (the TTS produced a chunk); Last marks the
// turn's final chunk.
type AudioQueued struct {
	TurnID int
	Last   bool
}

// AudioHeard is the speaker's report about agent turn TurnID's audio.
type AudioHeard struct {
	TurnID int
	// Playing: the speaker plays the turn's audio. Tail: it was paused or stopped, and
	// what the device held still comes out until Pos.
	Playing, Tail bool
	// Finished is set when the speaker heard the turn's last chunk to its end.
	Finished bool
	// ClausesHeard is n when clause n-1's last chunk was heard to its end (0: no such
	// news). A reply cut short (a failure, the token limit) has no chunk marked last:
	// its turn is over once every committed clause was heard.
	ClausesHeard int
	// Stopped is set on the speaker's final report after an interrupt.
	Stopped bool
	// Pos is the report's time on the session's timeline: now while playing, when the
	// output falls silent on a Tail.
	Pos time.Duration
	// Heard is where in the turn's text the listener is (nil when the audio carries
	// no text).
	Heard *HeardWord
}

// Audible reports whether the listener hears the turn's audio: while it plays, and
// during the tail of a pause or stop.
func (h AudioHeard) Audible() bool { return h.Playing || h.Tail }

// HeardWord is the speaker's report of the word being heard (see speaker.HeardText).
type HeardWord struct {
	ClauseID int
	// Start and End are the word's byte span in the clause (equal in a pause).
	Start, End int
	// Fraction is the share of the word's audio heard.
	Fraction float64
}

// Action is something the manager wants done. Exactly one field is set.
type Action struct {
	Respond    *Respond
	Pause      *ControlTurn
	Resume     *ControlTurn
	Interrupt  *ControlTurn
	Duck       *Duck
	Unduck     *ControlTurn
	Prepare    *Prepare
	Withdraw   *ControlTurn
	AppendUser *AppendUser
	// AppendBackchannel stores a backchannel (after the agent turn it accompanied).
	AppendBackchannel *AppendBackchannel
	CloseAgent        *CloseAgent
	Say               *Say
	State             *StateChange
}

// Respond asks for agent turn TurnID.
type Respond struct {
	TurnID int
	Reason string
}

// Prepare asks for agent turn TurnID ahead, as the reply to the user's words Text,
// before the user's turn surely ended: the reply stays unheard until a Respond for the
// same turn confirms it, or a Withdraw drops it.
type Prepare struct {
	TurnID int
	Text   string
}

// ControlTurn names the agent turn a pause, resume or interrupt is about.
type ControlTurn struct {
	TurnID int
	Reason string
}

// AppendUser stores a user utterance as turn TurnID.
type AppendUser struct {
	TurnID int
	Text   string
	// Start and End span the user's speech on the session's timeline.
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
	// nothing of it (then it is not stored at all).
	Heard *dialogue.Heard
	// Start and End are when the listener heard the turn's audio, from its first to
	// its last sample (session timeline).
	Start, End time.Duration
}

// Say makes the agent speak a fixed text as turn TurnID (re-engagement).
type Say struct {
	TurnID int
	Text   string
}

// StateChange reports the new conversation state.
type StateChange struct {
	From, To State
	TurnID   int
}
