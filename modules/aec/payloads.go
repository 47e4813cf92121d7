package aec

import (
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
)

// Played is what the module needs from the speaker's played-audio IUs (speaker.Played):
// the audio its output played (16 kHz mono; Start counts the played stream's samples)
// and when the listener heard its first sample.
type Played interface {
	PlayedAudio() (f audio.Frame, heard time.Time)
}

// Status is the payload of the module's status IUs (kind "aec"), sent every
// Config.StatsInterval of audio: the engine's estimates and what cancelling has cost.
// ADD+COMMIT.
type Status struct {
	// Pos is the stream position the status was taken at.
	Pos time.Duration
	// Stats are the engine's estimates (ERLE, residual echo likelihood, delay).
	Stats Stats
	// Cost is the processing time spent so far and the audio it processed.
	Cost Cost
	// Unreferenced is how much microphone audio was processed without the played
	// audio that covers it (it came later than MaxWait, or not at all).
	Unreferenced time.Duration
}

// Kind implements iu.Payload.
func (Status) Kind() string { return "aec" }

// Summary implements iu.Payload.
func (s Status) Summary() string {
	str := fmt.Sprintf("aec @%.2fs", s.Pos.Seconds())
	if s.Stats.ERLE.OK {
		str += fmt.Sprintf(" erle %.1f dB", s.Stats.ERLE.V)
	}
	if s.Stats.ResidualEchoLikelihood.OK {
		str += fmt.Sprintf(" residual %.2f", s.Stats.ResidualEchoLikelihood.V)
	}
	if s.Stats.Delay.OK {
		str += fmt.Sprintf(" delay %v", s.Stats.Delay.D)
	}
	return str + fmt.Sprintf(" cost %.2f%%", 100*s.Cost.RTF())
}

// Linear is the payload of the module's linear-output IUs (kind "aec-linear"), sent
// when its canceller has one (LinearCanceller): the same stretch of the microphone's
// timeline as the audio.Frame IU that follows it, with only the echo the canceller's
// linear filter models subtracted. ADD+COMMIT, grounded in the same input frame.
type Linear struct {
	Audio audio.Frame
}

// Kind implements iu.Payload.
func (Linear) Kind() string { return "aec-linear" }

// Summary implements iu.Payload.
func (l Linear) Summary() string { return "linear " + l.Audio.Summary() }

// LinearAudio returns the audio.
func (l Linear) LinearAudio() audio.Frame { return l.Audio }

// Cost is what echo cancellation has cost: processing time (the wall time of the
// canceller's Render and Capture calls, which is their CPU time on a machine that does
// not preempt them) for an amount of microphone audio.
type Cost struct {
	Audio      time.Duration
	Processing time.Duration
}

// RTF is the processing time per second of audio (0 before any audio).
func (c Cost) RTF() float64 {
	if c.Audio <= 0 {
		return 0
	}
	return c.Processing.Seconds() / c.Audio.Seconds()
}
