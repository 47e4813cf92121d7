// Package whispercpp is the ASR module's whisper.cpp engine: the cgo side of package
// asr, which pipeline opens when the configuration names "whisper".
package whispercpp

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/modules/asr"
)

var (
	_ asr.Engine       = (*Engine)(nil)
	_ asr.FinalDecoder = (*Engine)(nil)
	_ asr.QuickFinals  = (*Engine)(nil)
)

// Engine recognises with whisper.cpp by decoding the whole utterance so far on
// every Partial (the module's local agreement then keeps the partial results from
// flickering) and once more, with the final settings, on Final.
type Engine struct {
	cfg   asr.WhisperConfig
	model *whisper.Model
	dec   *whisper.Decoder
	audio []float32
	// forced says the next decode makes exactly textTokens text tokens (ForceTextTokens).
	forced     bool
	textTokens int
	// hurry: the next decodes are ones the user waits on (asr.Hurried).
	hurry bool
}

// Hurry implements asr.Hurried: decodes the user waits on take FinalThreads.
func (e *Engine) Hurry(on bool) { e.hurry = on }

// ForceTextTokens makes the next decode produce exactly n text tokens, whatever the
// model prefers: a model of whisper's shape with random weights then costs what a real
// one costs for a transcript that long (the realistic bench). Its words are noise.
func (e *Engine) ForceTextTokens(n int) { e.forced, e.textTokens = true, n }

// TokenCount returns how many tokens the model spells text with.
func (e *Engine) TokenCount(text string) (int, error) { return e.model.TokenCount(text) }

// New loads the model.
func New(cfg asr.WhisperConfig) (*Engine, error) {
	if cfg.Model == "" {
		return nil, errors.New("asr: whisper: no model configured")
	}
	if cfg.Threads <= 0 {
		cfg.Threads = min(4, runtime.NumCPU())
	}
	if l := cfg.Language; l != "" && l != "auto" && !whisper.KnownLanguage(l) {
		return nil, fmt.Errorf("asr: whisper language %q is not one whisper knows (want auto or a code such as en, de, fr)", l)
	}
	if err := ggml.LoadBackends(); err != nil {
		return nil, fmt.Errorf("asr: whisper: %w", err)
	}
	m, err := whisper.LoadModel(cfg.Model, whisper.ModelParams{UseGPU: cfg.UseGPU})
	if err != nil {
		return nil, fmt.Errorf("asr: %w", err)
	}
	d, err := m.NewDecoder()
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("asr: %w", err)
	}
	return &Engine{cfg: cfg, model: m, dec: d}, nil
}

// Start implements asr.Engine.
func (e *Engine) Start(ctx context.Context) error {
	e.audio = e.audio[:0]
	return nil
}

// Feed implements asr.Engine.
func (e *Engine) Feed(ctx context.Context, samples []float32) error {
	e.audio = append(e.audio, samples...)
	return nil
}

// Partial implements Engine: a fast greedy decode without temperature fallback.
func (e *Engine) Partial(ctx context.Context) (asr.Hypothesis, error) {
	p := whisper.DecodeParams{NoFallback: true}
	if e.cfg.ShortContext {
		p.AudioContext = whisper.AudioContextFor(len(e.audio))
	}
	return e.decode(ctx, p)
}

// Final implements asr.Engine.
func (e *Engine) Final(ctx context.Context) (asr.Hypothesis, error) {
	h, err := e.FinalOf(ctx, e.audio)
	e.audio = e.audio[:0]
	return h, err
}

// StatelessFinal implements asr.FinalDecoder: every whisper decode starts from nothing (no
// context carried over from earlier decodes).
func (e *Engine) StatelessFinal() bool { return true }

// FinalOf implements asr.FinalDecoder: the final decode of samples. The utterance being
// streamed is only e.audio, which this leaves alone. (With Fallback, a retry at a higher
// temperature samples from libwhisper's random generator, the one thing a decode may
// share with the ones before it.)
// Without FullFinal the encoder's window is cut to the audio plus a margin.
func (e *Engine) FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error) {
	p := whisper.DecodeParams{BeamSize: e.cfg.BeamSize, NoFallback: !e.cfg.Fallback}
	if !e.cfg.FullFinal {
		p.AudioContext = whisper.AudioContextFor(len(samples))
	}
	return e.decodeOf(ctx, samples, p)
}

// QuickFinals implements asr.QuickFinals: without FullFinal, a partial that decoded all
// of an utterance's speech is its final.
func (e *Engine) QuickFinals() bool { return !e.cfg.FullFinal }

func (e *Engine) decode(ctx context.Context, p whisper.DecodeParams) (asr.Hypothesis, error) {
	return e.decodeOf(ctx, e.audio, p)
}

func (e *Engine) decodeOf(ctx context.Context, samples []float32, p whisper.DecodeParams) (asr.Hypothesis, error) {
	p.Threads = e.cfg.Threads
	if e.hurry && e.cfg.FinalThreads > 0 {
		p.Threads = e.cfg.FinalThreads
	}
	p.Language = e.cfg.Language
	p.InitialPrompt = e.cfg.Prompt
	p.SingleSegment = true
	p.TokenTimestamps = true
	p.SuppressNonSpeech = true
	p.ForceTextTokens, p.TextTokens = e.forced, e.textTokens
	e.forced, e.textTokens = false, 0
	segs, err := e.dec.Decode(ctx, samples, p)
	if err != nil {
		return asr.Hypothesis{}, fmt.Errorf("whisper: %w", err)
	}
	var h asr.Hypothesis
	for _, w := range whisper.Words(segs) {
		if isAnnotation(w.Text) {
			continue
		}
		h.Words = append(h.Words, asr.HypWord{Text: w.Text, Start: w.Start, End: w.End, Confidence: w.P})
	}
	return h, nil
}

// isAnnotation reports whisper's bracketed descriptions of sounds ("[BLANK_AUDIO]",
// "(music)", "*laughs*"), which are not words the user said.
func isAnnotation(w string) bool {
	if len(w) < 2 {
		return false
	}
	switch open, last := w[0], w[len(w)-1]; {
	case open == '[' && last == ']', open == '(' && last == ')', open == '*' && last == '*':
		return true
	}
	return false
}

// Close frees the model.
func (e *Engine) Close() error {
	err := e.dec.Close()
	return errors.Join(err, e.model.Close())
}
