// Package webrtc adapts WebRTC's audio processing (engines/webrtcapm: AEC3 and, if
// configured, noise suppression, high-pass filter and gain control) to aec.
package webrtc

import (
	"fmt"
	"time"

	"github.com/parley-voice/parley/engines/webrtcapm"
	"github.com/parley-voice/parley/modules/aec"
)

// Engine is a webrtcapm.Processor seen as an aec.Engine.
type Engine struct{ p *webrtcapm.Processor }

var _ aec.Engine = Engine{}

// AEC3's settings for a laptop in a room, where cfg leaves them zero. The library's own
// (a 52 ms filter, 2.5 s of initial state) leave a room's reverberation to the
// suppressor, which lets a residue through in a session's first answer; these converge
// from the agent's first sound (TestReplayEchoConverges checks it). A longer
// filter follows a drifting microphone clock too slowly.
const (
	FilterLength = 104 * time.Millisecond
	InitialState = 500 * time.Millisecond
)

// DoubleTalk is the suppressor's tuning for double talk (audio.echo_double_talk). The
// library's keeps a band suppressed until the near end is about 5 dB above the echo it
// expects there, opens it by 3 dB per 4 ms block, and expects a room's tail to decay
// slowly: a user who speaks over the agent as loud as its echo loses 300 ms or more of
// their first word (the VAD then takes the barge-in for noise), and a word spoken just
// after one of the agent's goes with its tail. This passes the near end once it is
// about as loud as the expected echo, opens within a few blocks, and lets the tail's
// estimate fall faster. The price: more echo in the first second, while the filter
// converges, and at the quiet ends of phrases (TestERLE's convergence criterion then
// fails on a window at −68 dBFS), which the tail gate (aec.TailGate) and the overlap
// module's evidence must tell from a voice.
func DoubleTalk() webrtcapm.Suppressor {
	return webrtcapm.Suppressor{
		MaxGainRise:    8,
		LowTransparent: 1, LowSuppress: 1.5,
		HighTransparent: 0.3, HighSuppress: 0.5,
		ReverbDecay: 0.5,
	}
}

// NewEngine makes the processor at aec.Rate (cfg.SampleRate must be 0 or aec.Rate).
func NewEngine(cfg webrtcapm.Config) (Engine, error) {
	if cfg.SampleRate != 0 && cfg.SampleRate != aec.Rate {
		return Engine{}, fmt.Errorf("aec/webrtc: sample rate %d Hz: the pipeline runs at %d", cfg.SampleRate, aec.Rate)
	}
	cfg.SampleRate = aec.Rate
	if cfg.Echo == webrtcapm.EchoAEC3 {
		if cfg.EchoFilterLength == 0 {
			cfg.EchoFilterLength = FilterLength
		}
		if cfg.EchoInitialState == 0 {
			cfg.EchoInitialState = InitialState
		}
	}
	p, err := webrtcapm.New(cfg)
	if err != nil {
		return Engine{}, fmt.Errorf("aec/webrtc: %w", err)
	}
	return Engine{p}, nil
}

// New makes a canceller that takes blocks of any length (see aec.Stream); with
// cfg.LinearOutput it gives AEC3's linear output too (aec.LinearCanceller).
func New(cfg webrtcapm.Config) (*aec.Stream, error) {
	e, err := NewEngine(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.LinearOutput {
		return aec.NewStream(LinearEngine{e})
	}
	return aec.NewStream(e)
}

// LinearEngine is an Engine made with webrtcapm.Config.LinearOutput, seen as an
// aec.LinearEngine.
type LinearEngine struct{ Engine }

var _ aec.LinearEngine = LinearEngine{}

// ProcessCaptureLinear implements aec.LinearEngine.
func (e LinearEngine) ProcessCaptureLinear(near, linear []float32) error {
	return e.p.ProcessCaptureLinear(near, linear)
}

func (e Engine) FrameSize() int                      { return e.p.FrameSize() }
func (e Engine) ProcessRender(far []float32) error   { return e.p.ProcessRender(far) }
func (e Engine) ProcessCapture(near []float32) error { return e.p.ProcessCapture(near) }
func (e Engine) SetStreamDelay(d time.Duration)      { e.p.SetStreamDelay(d) }
func (e Engine) Latency() time.Duration              { return e.p.Latency() }
func (e Engine) Close() error                        { return e.p.Close() }

// Stats maps AEC3's figures; the residual echo likelihood comes from WebRTC's residual
// echo detector.
func (e Engine) Stats() aec.Stats {
	s := e.p.Stats()
	return aec.Stats{
		ERL:                    aec.Value{V: s.EchoReturnLoss.V, OK: s.EchoReturnLoss.OK},
		ERLE:                   aec.Value{V: s.EchoReturnLossEnhancement.V, OK: s.EchoReturnLossEnhancement.OK},
		Delay:                  aec.Duration{D: s.Delay.D, OK: s.Delay.OK},
		ResidualEchoLikelihood: aec.Value{V: s.ResidualEchoLikelihood.V, OK: s.ResidualEchoLikelihood.OK},
	}
}
