// Package speaker plays the agent's audio and reports what the listener hears.
//
// It plays "agent audio IUs": any IU whose payload implements PCM() audio.Frame (the TTS
// module's tts.Chunk does). Audio is queued in arrival order and played back to back at
// its own rate, converted to the output's rate with the audio package's resampler.
// The module emits progress IUs (payload Progress, kind "progress") at a steady rate
// while playing and at every state change. Each says which audio IU the listener hears
// and how many of its samples have been heard — what has come out of the speaker, not
// what was handed to the device — and is grounded in that audio IU.
//
// Outputs (Output) share all of this: package portaudio plays through a sound device in
// real time and derives the heard position from the device's own timing (frames consumed
// by the callback, corrected by the stream's output latency); NewFile plays on the
// network's clock (real or virtual), writes what the listener would have heard to a WAV
// file on the output timeline, and can simulate a device's output latency. Both report
// positions on an output timeline that starts when the module starts. The module writes
// the audio into a lock-free Ring, which the output's Renderer plays from.
//
// Control commands (package control) act at once: Pause holds the output and remembers
// the position, Resume continues from exactly that sample, and Interrupt{TurnID} drops
// everything queued for that turn and earlier, stops the output, and reports in a
// Stopped progress exactly which audio IU and sample were heard last. Duck lowers the
// level (a linear ramp of Options.DuckRamp in the renderer itself, so that it takes
// effect within one device buffer) and Unduck restores it; a level changes no position,
// and progress reports say the level heard (Gain). Audio for an
// interrupted turn that arrives later is dropped, and so is revoked audio that has not
// started playing.
//
// Audio that the device already holds cannot be called back: after Pause or Interrupt
// the listener still hears up to one output latency of it (the "tail"). Progress reports
// say so (Tail), and their Heard/Offset count the tail in, because the listener hears it.
package speaker

import (
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
)

// Audio is what the speaker plays: any payload that carries PCM.
type Audio interface {
	iu.Payload
	PCM() audio.Frame
}

// Turned is implemented by agent audio that belongs to a numbered agent turn, so that
// Interrupt{TurnID} can drop it. Audio without a turn is dropped by any Interrupt while
// it is queued, and is never refused afterwards.
type Turned interface {
	AgentTurn() int
}

// Speech is implemented by audio payloads that speak text (tts.Chunk), so that progress
// reports can say which word the listener hears.
type Speech interface {
	// HeardAt returns where in its text the listener is after hearing offset samples of
	// the payload's audio.
	HeardAt(offset int) dialogue.Position
}

// Tentative is implemented by audio that may be withdrawn before anyone should hear it
// (a reply prepared while the user may still go on speaking). Tentative audio plays only
// once its IU is committed; until then it waits, and so does everything queued after
// it. A revoke drops it unheard. Other audio plays as soon as it is added.
type Tentative interface {
	IsTentative() bool
}

// State is what the speaker is doing.
type State uint8

const (
	// Idle: nothing to play; everything queued has been heard.
	Idle State = iota
	// Playing: agent audio is being played (including short gaps while the next audio
	// is late).
	Playing
	// Paused: output held by a Pause command; Resume continues where it stopped.
	Paused
	// Stopped: output ended by an Interrupt (or by the end of the input while paused).
	Stopped
)

var stateNames = [...]string{Idle: "idle", Playing: "playing", Paused: "paused", Stopped: "stopped"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Progress is the payload of the speaker's progress IUs: what the listener hears.
type Progress struct {
	State State
	// Heard is the audio IU being heard now, or the last one heard ("" before any).
	// The progress IU is grounded in it.
	Heard iu.ID
	// Item is Heard's payload, so that consumers can read its turn, clause and word.
	Item iu.Payload
	// Offset is how many of Item's samples, at Item's own rate, the listener has heard;
	// Offset == Length means all of it.
	Offset int
	// Length is Item's length in samples at its own rate.
	Length int
	// Pos is the time on the speaker's output timeline (which starts when the module
	// starts) at which the listener has heard Item up to Offset. For reports while
	// playing it is now; for a Paused or Stopped report with Tail set it lies ahead.
	Pos time.Duration
	// Tail is set on Paused and Stopped reports while audio handed to the device before
	// the command is still coming out; Pos says when it ends. A report with Tail unset
	// follows when it has.
	Tail bool
	// Reason says what caused a state change ("pause turn 3", "interrupt turn 3",
	// "finished", ...); empty on steady reports.
	Reason string
	// Text is where in the agent's text the listener is, when Item speaks text (a
	// Speech payload): the word heard at Offset and how much of it. It is what the
	// dialogue history keeps of an interrupted turn.
	Text *dialogue.Position
	// Gain is the level the listener hears at Pos relative to full volume, in dB: 0 at
	// full volume, negative while the agent is ducked (or its ramp is under way).
	Gain float64
}

// Kind implements iu.Payload.
func (Progress) Kind() string { return "progress" }

// Summary implements iu.Payload.
func (p Progress) Summary() string {
	s := fmt.Sprintf("%s @%.3fs", p.State, p.Pos.Seconds())
	if p.Heard != "" {
		s += fmt.Sprintf(" %s %d/%d", p.Heard, p.Offset, p.Length)
	}
	if p.Tail {
		s += " tail"
	}
	if p.Gain != 0 {
		s += fmt.Sprintf(" %.1f dB", p.Gain)
	}
	if p.Reason != "" {
		s += " (" + p.Reason + ")"
	}
	return s
}

// Audible reports whether agent audio is coming out of the speaker: while playing, and
// during the tail of a pause or stop. The VAD uses it to know that the agent speaks.
func (p Progress) Audible() bool { return p.State == Playing || p.Tail }

// Finished reports whether Item has been heard to its end.
func (p Progress) Finished() bool { return p.Heard != "" && p.Offset >= p.Length }
