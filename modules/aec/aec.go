// Package aec is Parley's acoustic echo cancellation: it removes from the microphone's
// audio what the microphone picked up of the agent's own voice, so that a laptop's
// speakers do not make the agent interrupt itself.
//
// A Canceller is fed two streams of 16 kHz mono audio (the pipeline's rate): Render
// with what the speaker plays (the far end, the echo's reference) and Capture with what
// the microphone records (the near end), which comes back cleaned. Engines (WebRTC's
// AEC3, speex) work on fixed 10 ms frames; Stream turns such an Engine into a Canceller
// that takes blocks of any length. The engines' adapters live in the subpackages
// aec/webrtc and aec/speex, so this package stays pure Go.
//
// Timing. The order of the calls is the canceller's clock: Render(far) says "far is
// being played now", and the echo of it appears in audio passed to Capture after this
// call. SetDelay tells the engine how long after the Render call the echo reaches
// Capture (device output latency + acoustic path + device input latency, as seen by
// the caller). Render should keep pace with Capture: pass what the speaker really
// plays, silence included, as it plays.
package aec

import (
	"time"

	"github.com/parley-voice/parley/audio"
)

// Rate is the sample rate of everything in this package: the pipeline's.
const Rate = audio.PipelineRate

// Canceller cancels the echo of Render's audio in Capture's audio. It is owned by one
// goroutine.
type Canceller interface {
	// Render takes audio the speaker plays, any length.
	Render(far []float32) error
	// Capture takes microphone audio, any length, and returns as many samples of
	// cleaned audio, Latency behind: output sample i is the input sample Latency earlier.
	Capture(near []float32) ([]float32, error)
	// SetDelay gives the canceller the delay from Render to the echo in Capture.
	SetDelay(d time.Duration)
	// Latency is the fixed delay Capture's output has behind its input.
	Latency() time.Duration
	// Stats returns the engine's estimates.
	Stats() Stats
	// Close frees the engine; it is idempotent, and the other methods fail after it.
	Close() error
}

// Engine is a canceller working on fixed frames, as the cgo engines do.
type Engine interface {
	// FrameSize is the number of samples every frame must have.
	FrameSize() int
	// ProcessRender takes one frame of what the speaker plays; it only reads it.
	ProcessRender(far []float32) error
	// ProcessCapture cancels the echo in one frame of microphone audio, in place.
	ProcessCapture(near []float32) error
	// SetStreamDelay sets the delay hint (see Canceller.SetDelay).
	SetStreamDelay(d time.Duration)
	// Latency is the engine's own algorithmic delay: how far a processed frame's
	// content lags the frame it was given.
	Latency() time.Duration
	Stats() Stats
	Close() error
}

// LinearEngine is an Engine that also gives its linear filter's output.
type LinearEngine interface {
	Engine
	// ProcessCaptureLinear is ProcessCapture that also fills linear (as long as near)
	// with the frame's linear filter output, aligned as near's output is.
	ProcessCaptureLinear(near, linear []float32) error
}

// LinearCanceller is a Canceller that also gives what its linear filter left: the
// microphone with the echo the filter models subtracted, nothing suppressed. It holds
// more echo than Capture's output, but a voice that starts over the echo keeps its
// onset there, which a suppressor takes away while it cannot yet tell the voice from
// echo; a recogniser that decodes sounds found in Capture's output hears the voice
// whole in it.
type LinearCanceller interface {
	Canceller
	// CaptureLinear is Capture that also returns the linear output, aligned with out;
	// linear is nil when the engine has none.
	CaptureLinear(near []float32) (out, linear []float32, err error)
}

// Stats are an engine's own estimates. A figure is known only when its OK is set:
// engines report different subsets, and most only after they have heard some echo.
type Stats struct {
	// ERL (echo return loss) in dB: the far end's power over the echo's power at the
	// microphone.
	ERL Value
	// ERLE (echo return loss enhancement) in dB: the echo's power over the power of
	// what is left of it after cancellation.
	ERLE Value
	// Delay is the engine's estimate of the delay from render to capture.
	Delay Duration
	// ResidualEchoLikelihood in [0, 1]: how likely the output still holds echo. A VAD
	// may ask for more evidence of speech while it is high.
	ResidualEchoLikelihood Value
}

// Value is an optional figure.
type Value struct {
	V  float64
	OK bool
}

// Duration is an optional duration.
type Duration struct {
	D  time.Duration
	OK bool
}

// latencySamples is c's latency in samples: exact where c counts it so (Stream,
// TailGate), rounded from Latency otherwise.
func latencySamples(c Canceller) int {
	if ls, ok := c.(interface{ LatencySamples() int }); ok {
		return ls.LatencySamples()
	}
	return int(audio.DurationToSamples(c.Latency(), Rate))
}
