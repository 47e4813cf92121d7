// Package espeakng is the TTS module's synthesiser: libespeak-ng through
// engines/espeak. Package tts stays pure Go; pipeline (and `agent say`) open this engine
// and hand it to tts.New.
package espeakng

import (
	"context"
	"fmt"

	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/modules/tts"
)

var _ tts.Engine = (*Engine)(nil)

// options are the voice settings of cfg.
func options(cfg tts.Config) espeak.Options {
	return espeak.Options{Voice: cfg.Voice, Rate: cfg.Rate, Pitch: cfg.Pitch, Volume: cfg.Volume, DataPath: cfg.DataPath}
}

// Engine speaks with libespeak-ng. It owns the library for the process (see
// espeak.Synth), so a process has at most one; Close releases it.
type Engine struct {
	synth *espeak.Synth
}

// New opens libespeak-ng with cfg's voice settings.
func New(cfg tts.Config) (*Engine, error) {
	s, err := espeak.New(options(cfg))
	if err != nil {
		return nil, fmt.Errorf("tts: %w", err)
	}
	return &Engine{synth: s}, nil
}

// Synth returns the underlying synthesiser (for listing voices, say).
func (e *Engine) Synth() *espeak.Synth { return e.synth }

// SampleRate implements tts.Engine.
func (e *Engine) SampleRate() int { return e.synth.SampleRate() }

// Synthesize implements tts.Engine.
func (e *Engine) Synthesize(ctx context.Context, text string, emit func(tts.Piece) error) error {
	return e.synth.Stream(ctx, text, func(p espeak.Piece) error {
		out := tts.Piece{Samples: make([]float32, len(p.Samples)), Marks: make([]tts.Mark, 0, len(p.Words))}
		for i, v := range p.Samples {
			out.Samples[i] = float32(v) / 32768
		}
		for _, w := range p.Words {
			out.Marks = append(out.Marks, tts.Mark{Sample: int64(w.Sample), Start: w.CharStart, End: w.CharEnd})
		}
		return emit(out)
	})
}

// Close releases libespeak-ng.
func (e *Engine) Close() error { return e.synth.Close() }
