package tts

import (
	"context"
	"fmt"

	"github.com/parley-voice/parley/engines/espeak"
)

// Engine is a speech synthesiser as the module needs it. The module calls it from one
// goroutine at a time.
type Engine interface {
	// SampleRate is the rate of the audio Synthesize produces.
	SampleRate() int
	// Synthesize speaks text and calls emit, on the calling goroutine, with its audio in
	// order as it is produced, long before the whole text is done. Each word's start is
	// reported with the piece whose samples it falls in, or earlier. An error from emit
	// or the end of ctx stops the synthesis; Synthesize then returns that error.
	Synthesize(ctx context.Context, text string, emit func(Piece) error) error
}

// Piece is a stretch of synthesised audio.
type Piece struct {
	// Samples are mono PCM in [-1, 1] at the engine's rate, following the previous
	// piece's without a gap. The receiver owns them.
	Samples []float32
	// Marks are the words that start in (or before the end of) these samples.
	Marks []Mark
}

// Mark is a word start reported by the engine.
type Mark struct {
	// Sample is the position of the word's first sample, counted from the start of the
	// text's audio.
	Sample int64
	// Start and End are the word's byte span in the text given to Synthesize.
	Start, End int
}

// EspeakEngine speaks with libespeak-ng. It owns the library for the process (see
// espeak.Synth), so a process has at most one; Close releases it.
type EspeakEngine struct {
	synth *espeak.Synth
}

// NewEspeakEngine opens libespeak-ng with cfg's voice settings.
func NewEspeakEngine(cfg Config) (*EspeakEngine, error) {
	s, err := espeak.New(cfg.espeakOptions())
	if err != nil {
		return nil, fmt.Errorf("tts: %w", err)
	}
	return &EspeakEngine{synth: s}, nil
}

// Synth returns the underlying synthesiser (for listing voices, say).
func (e *EspeakEngine) Synth() *espeak.Synth { return e.synth }

// SampleRate implements Engine.
func (e *EspeakEngine) SampleRate() int { return e.synth.SampleRate() }

// Synthesize implements Engine.
func (e *EspeakEngine) Synthesize(ctx context.Context, text string, emit func(Piece) error) error {
	return e.synth.Stream(ctx, text, func(p espeak.Piece) error {
		out := Piece{Samples: make([]float32, len(p.Samples)), Marks: make([]Mark, 0, len(p.Words))}
		for i, v := range p.Samples {
			out.Samples[i] = float32(v) / 32768
		}
		for _, w := range p.Words {
			out.Marks = append(out.Marks, Mark{Sample: int64(w.Sample), Start: w.CharStart, End: w.CharEnd})
		}
		return emit(out)
	})
}

// Close releases libespeak-ng.
func (e *EspeakEngine) Close() error { return e.synth.Close() }
