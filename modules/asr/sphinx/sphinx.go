// Package sphinx is the ASR module's pocketsphinx engine: the cgo side of package asr,
// which pipeline opens when the configuration names "pocketsphinx".
package sphinx

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/modules/asr"
)

var (
	_ asr.Engine       = (*Engine)(nil)
	_ asr.FinalDecoder = (*Engine)(nil)
	_ asr.SideLoader   = (*Engine)(nil)
)

// decoderConfig is the decoder's part of cfg.
func decoderConfig(cfg asr.PocketsphinxConfig) pocketsphinx.Config {
	return pocketsphinx.Config{HMM: cfg.HMM, LM: cfg.LM, Dict: cfg.Dict, SampleRate: cfg.SampleRate, LogLevel: cfg.LogLevel, Options: cfg.Options}
}

// Engine recognises with pocketsphinx, decoding audio as it is fed and
// reading pocketsphinx's own partial hypotheses.
type Engine struct {
	cfg   asr.PocketsphinxConfig
	dec   *pocketsphinx.Decoder // the streaming pass
	audio []float32             // the utterance, kept for the final pass
	pcm   []int16

	// side runs the final passes FinalOf asks for while the streaming pass has an
	// utterance open: pocketsphinx decodes one utterance at a time per decoder, and
	// ending the streaming one would lose its search. Loaded on first need.
	side *pocketsphinx.Decoder
}

// New loads the models.
func New(cfg asr.PocketsphinxConfig) (*Engine, error) {
	d, err := pocketsphinx.NewDecoder(decoderConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("asr: %w", err)
	}
	return &Engine{cfg: cfg, dec: d}, nil
}

// Start implements asr.Engine. The streaming pass keeps pocketsphinx's live cepstral mean
// from one utterance to the next, as pocketsphinx's live mode does: it adapts to the
// microphone, which the partial hypotheses of later utterances profit from.
func (e *Engine) Start(ctx context.Context) error {
	e.audio = e.audio[:0]
	return e.dec.StartUtt()
}

// Feed implements asr.Engine.
func (e *Engine) Feed(ctx context.Context, samples []float32) error {
	if e.cfg.FinalPass {
		e.audio = append(e.audio, samples...)
	}
	return e.dec.ProcessFloat(samples)
}

// Partial implements asr.Engine.
func (e *Engine) Partial(ctx context.Context) (asr.Hypothesis, error) {
	return hypothesisOf(e.dec), nil
}

// Final implements asr.Engine.
func (e *Engine) Final(ctx context.Context) (asr.Hypothesis, error) {
	if err := e.dec.EndUtt(); err != nil {
		return asr.Hypothesis{}, err
	}
	if !e.cfg.FinalPass || len(e.audio) == 0 {
		return hypothesisOf(e.dec), nil
	}
	h, err := e.finalPass(ctx, e.dec, e.audio)
	if err != nil {
		return asr.Hypothesis{}, err
	}
	e.audio = e.audio[:0]
	return h, nil
}

// StatelessFinal implements asr.FinalDecoder: only the final pass depends on the utterance's
// audio alone. Without it the final hypothesis is the streaming pass's, which starts
// from the cepstral mean earlier utterances left.
func (e *Engine) StatelessFinal() bool { return e.cfg.FinalPass }

// FinalOf implements asr.FinalDecoder: the final pass over samples, exactly as Final runs
// it. While the streaming pass has an utterance open, the pass runs on a second decoder
// (LoadSide, or the first such call: the models once more, about 90 MB and 0.3 s here),
// so the streaming utterance's search and cepstral mean stay as they were.
func (e *Engine) FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error) {
	if !e.cfg.FinalPass {
		return asr.Hypothesis{}, asr.ErrStatefulFinal
	}
	if err := ctx.Err(); err != nil {
		return asr.Hypothesis{}, err
	}
	if len(samples) == 0 {
		return asr.Hypothesis{}, nil // what Final gives for an utterance without audio
	}
	dec := e.dec
	if dec.InUtterance() {
		if err := e.LoadSide(); err != nil {
			return asr.Hypothesis{}, err
		}
		dec = e.side
	}
	return e.finalPass(ctx, dec, samples)
}

// LoadSide implements asr.SideLoader: it loads the decoder FinalOf uses while the
// streaming pass has an utterance open (the models once more, about 0.3 s here), unless
// it is loaded already. Without the final pass there is nothing to load.
func (e *Engine) LoadSide() error {
	if e.side != nil || !e.cfg.FinalPass {
		return nil
	}
	d, err := pocketsphinx.NewDecoder(decoderConfig(e.cfg))
	if err != nil {
		return fmt.Errorf("asr: final-pass decoder: %w", err)
	}
	e.side = d
	return nil
}

// finalPass decodes samples in one piece on dec with freshly initialised feature
// computation, so that the result depends on the audio alone and is exactly what
// `pocketsphinx single` gives for it. (Starting from the cepstral mean the streaming
// pass adapted instead measured 13 WER points worse on the shared recordings.) dec's
// cepstral mean is restored afterwards, for the streaming pass's next utterance.
func (e *Engine) finalPass(ctx context.Context, dec *pocketsphinx.Decoder, samples []float32) (asr.Hypothesis, error) {
	if err := ctx.Err(); err != nil {
		return asr.Hypothesis{}, err
	}
	live := dec.CMN()
	if err := dec.ResetFeatures(); err != nil {
		return asr.Hypothesis{}, err
	}
	e.pcm = pocketsphinx.FloatToPCM16(e.pcm[:0], samples)
	if err := dec.StartUtt(); err != nil {
		return asr.Hypothesis{}, err
	}
	if err := dec.Process(e.pcm, true); err != nil {
		return asr.Hypothesis{}, err
	}
	if err := dec.EndUtt(); err != nil {
		return asr.Hypothesis{}, err
	}
	h := hypothesisOf(dec)
	return h, dec.SetCMN(live)
}

func hypothesisOf(dec *pocketsphinx.Decoder) asr.Hypothesis {
	var h asr.Hypothesis
	final := !dec.InUtterance()
	for _, w := range dec.Words() {
		if w.Filler {
			continue
		}
		hw := asr.HypWord{Text: w.Text, Start: w.Start, End: w.End}
		if final {
			hw.Confidence = float32(w.Prob)
		}
		h.Words = append(h.Words, hw)
	}
	return h
}

// Close frees the decoders.
func (e *Engine) Close() error {
	err := e.dec.Close()
	if e.side != nil {
		err = errors.Join(err, e.side.Close())
	}
	return err
}
