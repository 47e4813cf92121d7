package turntaking

import (
	"time"

	"github.com/parley-voice/parley/dialogue"
)

// Event is something the policy learns. Exactly one of the pointer fields is set. Times
// (At, onsets, ends) are clock times; the spans of what is stored (Utterance.Start,
// AudioHeard.Pos) are durations on the session's timeline, as the records keep them.
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

// ScoredWord is a recognised word with the recogniser's confidence (0–1; 0: none given).
type ScoredWord struct {
	Text       string
	Confidence float32
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
	Heard *dialogue.Position
}

// Audible reports whether the listener hears the turn's audio: while it plays, and
// during the tail of a pause or stop.
func (h AudioHeard) Audible() bool { return h.Playing || h.Tail }

// SoundKind is the overlap module's acoustic judgement of a sound.
type SoundKind uint8

const (
	SoundUnknown SoundKind = iota
	// SoundNoise: not a voice (a cough, a knock, a rustle).
	SoundNoise
	// SoundHum: a voice with the mouth closed ("mm-hmm", "hmm").
	SoundHum
	// SoundVoice: a voice, speech.
	SoundVoice
)

func (k SoundKind) String() string {
	switch k {
	case SoundNoise:
		return "noise"
	case SoundHum:
		return "hum"
	case SoundVoice:
		return "voice"
	}
	return "unknown"
}

// OverlapSound is the overlap module's evidence so far about a sound the user makes
// while the agent is audible (see package overlap).
type OverlapSound struct {
	// Onset is when the sound began (clock time).
	Onset time.Time
	Kind  SoundKind
	// Words is the latest decode of the sound; DecodedTo how much of the sound it covered
	// and Decodes how many decodes there were (a new number: a new decode).
	Words     []ScoredWord
	DecodedTo time.Duration
	Decodes   int
	// Ended: the sound has stopped (at End); it may start again until Final.
	Ended bool
	End   time.Time
	// Dropped: the VAD withdrew it as too short to be speech.
	Dropped bool
	// Final: the module's last word on the sound.
	Final bool
}
