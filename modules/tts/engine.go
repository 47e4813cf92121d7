package tts

import "context"

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
