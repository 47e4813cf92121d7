// Package speex adapts libspeexdsp's echo canceller and residual echo suppressor
// (engines/speexdsp) to aec.
package speex

import (
	"fmt"
	"time"

	"github.com/parley-voice/parley/engines/speexdsp"
	"github.com/parley-voice/parley/modules/aec"
)

// Engine is a speexdsp.Canceller seen as an aec.Engine.
type Engine struct{ c *speexdsp.Canceller }

var _ aec.Engine = Engine{}

// NewEngine makes the canceller at aec.Rate (cfg.SampleRate must be 0 or aec.Rate).
func NewEngine(cfg speexdsp.Config) (Engine, error) {
	if cfg.SampleRate != 0 && cfg.SampleRate != aec.Rate {
		return Engine{}, fmt.Errorf("aec/speex: sample rate %d Hz: the pipeline runs at %d", cfg.SampleRate, aec.Rate)
	}
	cfg.SampleRate = aec.Rate
	c, err := speexdsp.New(cfg)
	if err != nil {
		return Engine{}, fmt.Errorf("aec/speex: %w", err)
	}
	return Engine{c}, nil
}

// New makes a canceller that takes blocks of any length (see aec.Stream).
func New(cfg speexdsp.Config) (*aec.Stream, error) {
	e, err := NewEngine(cfg)
	if err != nil {
		return nil, err
	}
	return aec.NewStream(e)
}

func (e Engine) FrameSize() int                      { return e.c.FrameSize() }
func (e Engine) ProcessRender(far []float32) error   { return e.c.ProcessRender(far) }
func (e Engine) ProcessCapture(near []float32) error { return e.c.ProcessCapture(near) }
func (e Engine) SetStreamDelay(d time.Duration)      { e.c.SetStreamDelay(d) }
func (e Engine) Latency() time.Duration              { return e.c.Latency() }
func (e Engine) Close() error                        { return e.c.Close() }

// Stats maps what speex offers: the echo path's loss and delay as its adaptive filter
// sees them. Speex estimates neither ERLE nor residual echo.
func (e Engine) Stats() aec.Stats {
	s := e.c.Stats()
	return aec.Stats{
		ERL:   aec.Value{V: s.EchoReturnLoss, OK: s.EchoReturnLossOK},
		Delay: aec.Duration{D: s.Delay, OK: s.EchoReturnLossOK},
	}
}
