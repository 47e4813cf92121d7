package asr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/engines/whisper"
)

// ClosableEngine is an Engine that holds native resources.
type ClosableEngine interface {
	Engine
	io.Closer
}

// OpenEngine creates the engine cfg.Engine names.
func OpenEngine(cfg Config) (ClosableEngine, error) {
	switch cfg.Engine {
	case "whisper":
		return NewWhisperEngine(cfg.Whisper)
	case "pocketsphinx", "":
		return NewPocketsphinxEngine(cfg.Pocketsphinx)
	}
	return nil, fmt.Errorf("asr: unknown engine %q (want whisper or pocketsphinx)", cfg.Engine)
}

// WhisperConfig configures the whisper.cpp engine.
type WhisperConfig struct {
	// Model is a ggml whisper model file.
	Model string `yaml:"model"`
	// Threads for decoding (min(4, CPUs) when zero).
	Threads int `yaml:"threads"`
	// Language code, or "auto".
	Language string `yaml:"language"`
	// Prompt conditions the decoder (names, spelling, style).
	Prompt string `yaml:"prompt"`
	// BeamSize for the final decode (greedy when below 2); partial decodes are greedy.
	BeamSize int `yaml:"beam_size"`
	// UseGPU lets libwhisper use a GPU backend when one is loaded.
	UseGPU bool `yaml:"use_gpu"`
	// ShortContext runs partial decodes with the encoder window cut to the audio's
	// length instead of whisper's fixed 30 s: several times faster for utterances of a
	// few seconds, slightly less accurate. The final decode always uses the full window.
	ShortContext bool `yaml:"short_context"`
	// Fallback retries a final decode that fails whisper's quality checks at higher
	// temperatures (whisper's default behaviour); partial decodes never retry.
	Fallback bool `yaml:"fallback"`
}

// DefaultWhisperConfig returns English, greedy decoding, short-context partials and
// temperature fallback for the final decode. Model is empty: callers point it at their
// model directory.
func DefaultWhisperConfig() WhisperConfig {
	return WhisperConfig{Language: "en", UseGPU: true, ShortContext: true, Fallback: true}
}

// WhisperEngine recognises with whisper.cpp by decoding the whole utterance so far on
// every Partial (the module's local agreement then keeps the partial results from
// flickering) and once more, with the final settings, on Final.
type WhisperEngine struct {
	cfg   WhisperConfig
	model *whisper.Model
	dec   *whisper.Decoder
	audio []float32
}

// NewWhisperEngine loads the model.
func NewWhisperEngine(cfg WhisperConfig) (*WhisperEngine, error) {
	if cfg.Model == "" {
		return nil, errors.New("asr: whisper: no model configured")
	}
	if cfg.Threads <= 0 {
		cfg.Threads = min(4, runtime.NumCPU())
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
	return &WhisperEngine{cfg: cfg, model: m, dec: d}, nil
}

// Start implements Engine.
func (e *WhisperEngine) Start(ctx context.Context) error {
	e.audio = e.audio[:0]
	return nil
}

// Feed implements Engine.
func (e *WhisperEngine) Feed(ctx context.Context, samples []float32) error {
	e.audio = append(e.audio, samples...)
	return nil
}

// Partial implements Engine: a fast greedy decode without temperature fallback.
func (e *WhisperEngine) Partial(ctx context.Context) (Hypothesis, error) {
	p := whisper.DecodeParams{NoFallback: true}
	if e.cfg.ShortContext {
		p.AudioContext = whisper.AudioContextFor(len(e.audio))
	}
	return e.decode(ctx, p)
}

// Final implements Engine.
func (e *WhisperEngine) Final(ctx context.Context) (Hypothesis, error) {
	h, err := e.FinalOf(ctx, e.audio)
	e.audio = e.audio[:0]
	return h, err
}

// StatelessFinal implements FinalDecoder: every whisper decode starts from nothing (no
// context carried over from earlier decodes).
func (e *WhisperEngine) StatelessFinal() bool { return true }

// FinalOf implements FinalDecoder: the final decode of samples. The utterance being
// streamed is only e.audio, which this leaves alone. (With Fallback, a retry at a higher
// temperature samples from libwhisper's random generator, the one thing a decode may
// share with the ones before it.)
func (e *WhisperEngine) FinalOf(ctx context.Context, samples []float32) (Hypothesis, error) {
	return e.decodeOf(ctx, samples, whisper.DecodeParams{BeamSize: e.cfg.BeamSize, NoFallback: !e.cfg.Fallback})
}

func (e *WhisperEngine) decode(ctx context.Context, p whisper.DecodeParams) (Hypothesis, error) {
	return e.decodeOf(ctx, e.audio, p)
}

func (e *WhisperEngine) decodeOf(ctx context.Context, samples []float32, p whisper.DecodeParams) (Hypothesis, error) {
	p.Threads = e.cfg.Threads
	p.Language = e.cfg.Language
	p.InitialPrompt = e.cfg.Prompt
	p.SingleSegment = true
	p.TokenTimestamps = true
	p.SuppressNonSpeech = true
	segs, err := e.dec.Decode(ctx, samples, p)
	if err != nil {
		return Hypothesis{}, fmt.Errorf("whisper: %w", err)
	}
	var h Hypothesis
	for _, w := range whisper.Words(segs) {
		if isAnnotation(w.Text) {
			continue
		}
		h.Words = append(h.Words, HypWord{Text: w.Text, Start: w.Start, End: w.End, Confidence: w.P})
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
func (e *WhisperEngine) Close() error {
	err := e.dec.Close()
	return errors.Join(err, e.model.Close())
}

// PocketsphinxConfig configures the pocketsphinx engine.
type PocketsphinxConfig struct {
	pocketsphinx.Config `yaml:",inline"`
	// FinalPass decodes the whole utterance once more at the end, in one piece, as
	// `pocketsphinx single` does: better normalisation than the streaming pass, whose
	// hypotheses serve as the partial results.
	FinalPass bool `yaml:"final_pass"`
}

// DefaultPocketsphinxConfig returns pocketsphinx's own model defaults with a final pass.
func DefaultPocketsphinxConfig() PocketsphinxConfig {
	return PocketsphinxConfig{FinalPass: true}
}

// PocketsphinxEngine recognises with pocketsphinx, decoding audio as it is fed and
// reading pocketsphinx's own partial hypotheses.
type PocketsphinxEngine struct {
	cfg   PocketsphinxConfig
	dec   *pocketsphinx.Decoder // the streaming pass
	audio []float32             // the utterance, kept for the final pass
	pcm   []int16

	// side runs the final passes FinalOf asks for while the streaming pass has an
	// utterance open: pocketsphinx decodes one utterance at a time per decoder, and
	// ending the streaming one would lose its search. Loaded on first need.
	side *pocketsphinx.Decoder
}

// NewPocketsphinxEngine loads the models.
func NewPocketsphinxEngine(cfg PocketsphinxConfig) (*PocketsphinxEngine, error) {
	d, err := pocketsphinx.NewDecoder(cfg.Config)
	if err != nil {
		return nil, fmt.Errorf("asr: %w", err)
	}
	return &PocketsphinxEngine{cfg: cfg, dec: d}, nil
}

// Start implements Engine. The streaming pass keeps pocketsphinx's live cepstral mean
// from one utterance to the next, as pocketsphinx's live mode does: it adapts to the
// microphone, which the partial hypotheses of later utterances profit from.
func (e *PocketsphinxEngine) Start(ctx context.Context) error {
	e.audio = e.audio[:0]
	return e.dec.StartUtt()
}

// Feed implements Engine.
func (e *PocketsphinxEngine) Feed(ctx context.Context, samples []float32) error {
	if e.cfg.FinalPass {
		e.audio = append(e.audio, samples...)
	}
	return e.dec.ProcessFloat(samples)
}

// Partial implements Engine.
func (e *PocketsphinxEngine) Partial(ctx context.Context) (Hypothesis, error) {
	return hypothesisOf(e.dec), nil
}

// Final implements Engine.
func (e *PocketsphinxEngine) Final(ctx context.Context) (Hypothesis, error) {
	if err := e.dec.EndUtt(); err != nil {
		return Hypothesis{}, err
	}
	if !e.cfg.FinalPass || len(e.audio) == 0 {
		return hypothesisOf(e.dec), nil
	}
	h, err := e.finalPass(ctx, e.dec, e.audio)
	if err != nil {
		return Hypothesis{}, err
	}
	e.audio = e.audio[:0]
	return h, nil
}

// StatelessFinal implements FinalDecoder: only the final pass depends on the utterance's
// audio alone. Without it the final hypothesis is the streaming pass's, which starts
// from the cepstral mean earlier utterances left.
func (e *PocketsphinxEngine) StatelessFinal() bool { return e.cfg.FinalPass }

// FinalOf implements FinalDecoder: the final pass over samples, exactly as Final runs
// it. While the streaming pass has an utterance open, the pass runs on a second decoder
// (loaded on the first such call: the models once more, about 90 MB and 0.3 s here),
// so the streaming utterance's search and cepstral mean stay as they were.
func (e *PocketsphinxEngine) FinalOf(ctx context.Context, samples []float32) (Hypothesis, error) {
	if !e.cfg.FinalPass {
		return Hypothesis{}, ErrStatefulFinal
	}
	if err := ctx.Err(); err != nil {
		return Hypothesis{}, err
	}
	if len(samples) == 0 {
		return Hypothesis{}, nil // what Final gives for an utterance without audio
	}
	dec := e.dec
	if dec.InUtterance() {
		if e.side == nil {
			d, err := pocketsphinx.NewDecoder(e.cfg.Config)
			if err != nil {
				return Hypothesis{}, fmt.Errorf("asr: final-pass decoder: %w", err)
			}
			e.side = d
		}
		dec = e.side
	}
	return e.finalPass(ctx, dec, samples)
}

// finalPass decodes samples in one piece on dec with freshly initialised feature
// computation, so that the result depends on the audio alone and is exactly what
// `pocketsphinx single` gives for it. (Starting from the cepstral mean the streaming
// pass adapted instead measured 13 WER points worse on the shared recordings.) dec's
// cepstral mean is restored afterwards, for the streaming pass's next utterance.
func (e *PocketsphinxEngine) finalPass(ctx context.Context, dec *pocketsphinx.Decoder, samples []float32) (Hypothesis, error) {
	if err := ctx.Err(); err != nil {
		return Hypothesis{}, err
	}
	live := dec.CMN()
	if err := dec.ResetFeatures(); err != nil {
		return Hypothesis{}, err
	}
	e.pcm = pocketsphinx.FloatToPCM16(e.pcm[:0], samples)
	if err := dec.StartUtt(); err != nil {
		return Hypothesis{}, err
	}
	if err := dec.Process(e.pcm, true); err != nil {
		return Hypothesis{}, err
	}
	if err := dec.EndUtt(); err != nil {
		return Hypothesis{}, err
	}
	h := hypothesisOf(dec)
	return h, dec.SetCMN(live)
}

func hypothesisOf(dec *pocketsphinx.Decoder) Hypothesis {
	var h Hypothesis
	final := !dec.InUtterance()
	for _, w := range dec.Words() {
		if w.Filler {
			continue
		}
		hw := HypWord{Text: w.Text, Start: w.Start, End: w.End}
		if final {
			hw.Confidence = float32(w.Prob)
		}
		h.Words = append(h.Words, hw)
	}
	return h
}

// Close frees the decoders.
func (e *PocketsphinxEngine) Close() error {
	err := e.dec.Close()
	if e.side != nil {
		err = errors.Join(err, e.side.Close())
	}
	return err
}
