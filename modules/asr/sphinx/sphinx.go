// Package sphinx is the ASR module's pocketsphinx engine: the cgo side of package asr,
// which pipeline opens when the configuration names "pocketsphinx".
package sphinx

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/modules/asr"
)

var (
	_ asr.Engine       = (*Engine)(nil)
	_ asr.FinalDecoder = (*Engine)(nil)
	_ asr.SideLoader   = (*Engine)(nil)
	_ asr.Peeker       = (*Engine)(nil)
)

// decoderConfig is the decoder's part of cfg.
func decoderConfig(cfg asr.PocketsphinxConfig) pocketsphinx.Config {
	return pocketsphinx.Config{HMM: cfg.HMM, LM: cfg.LM, Dict: cfg.Dict, SampleRate: cfg.SampleRate, LogLevel: cfg.LogLevel, Options: cfg.DecoderOptions()}
}

// replayPiece is how much of an utterance's audio a decode again feeds at once, between
// looks at its context.
const replayPiece = audio.PipelineRate / 10

// Engine recognises with pocketsphinx, decoding audio as it is fed and reading
// pocketsphinx's own partial hypotheses. With the final pass, an utterance's final
// hypothesis comes from a second decode of its audio in one piece (FinalOf) until the
// streaming pass has decoded AdaptAfter of audio; from then on the streaming pass's
// live cepstral mean fits the microphone, and its own final (PeekFinal) is as good.
type Engine struct {
	cfg   asr.PocketsphinxConfig
	dec   *pocketsphinx.Decoder // the streaming pass
	audio []float32             // the utterance fed so far: for the final pass, and to decode it again after a peek
	pcm   []int16

	// side runs the final passes FinalOf asks for while the streaming pass has an
	// utterance open: pocketsphinx decodes one utterance at a time per decoder, and
	// ending the streaming one would lose its search. Loaded on first need.
	side *pocketsphinx.Decoder

	// passed counts the samples the final pass decoded whole; passedCMN is the cepstral
	// mean of the last of them (the microphone's and the speaker's, as well as one
	// utterance can tell), which the streaming pass's next utterance starts from.
	passed    int64
	passedCMN string
	// own says this utterance's final is the streaming pass's (decided at Start).
	own bool
	// startCMN is the cepstral mean the utterance began with: decoding it again after a
	// peek starts from it, as the first decode did.
	startCMN string
	// peeked holds the final hypothesis PeekFinal ended the streaming utterance with;
	// replayed counts the samples of audio fed again since more audio came after it.
	peeked   *asr.Hypothesis
	replayed int
	replay   bool
}

// New loads the models.
func New(cfg asr.PocketsphinxConfig) (*Engine, error) {
	streaming := decoderConfig(cfg)
	streaming.Options = cfg.StreamingOptions()
	d, err := pocketsphinx.NewDecoder(streaming)
	if err != nil {
		return nil, fmt.Errorf("asr: %w", err)
	}
	e := &Engine{cfg: cfg, dec: d}
	if cfg.FinalPassApart() {
		// Every final pass needs the second decoder: load it now, not at the first turn.
		if err := e.LoadSide(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return e, nil
}

// Start implements asr.Engine. The streaming pass keeps pocketsphinx's live cepstral mean
// from one utterance to the next, as pocketsphinx's live mode does: it adapts to the
// microphone, which the hypotheses of later utterances profit from.
func (e *Engine) Start(ctx context.Context) error {
	// The last utterance ends here if nothing ended it: its audio is part of the live
	// cepstral mean from now on, unless the final pass measured a better one.
	if err := e.dec.EndUtt(); err != nil {
		return err
	}
	e.audio, e.peeked, e.replay = e.audio[:0], nil, false
	e.startCMN = e.dec.CMN()
	if e.passedCMN != "" {
		e.startCMN, e.passedCMN = e.passedCMN, ""
	}
	e.own = !e.cfg.FinalPass || e.cfg.AdaptAfter > 0 && e.passed >= audio.DurationToSamples(e.cfg.AdaptAfter, audio.PipelineRate)
	return e.begin()
}

// begin starts pocketsphinx's utterance from startCMN and otherwise fresh feature
// computation (its noise estimate learns from the utterance's first frames, as the final
// pass's does): the state a decode of the utterance again after a peek can start from
// too, so that it gives the same hypotheses.
func (e *Engine) begin() error {
	if err := e.dec.ResetFeatures(); err != nil {
		return err
	}
	if err := e.dec.SetCMN(e.startCMN); err != nil {
		return err
	}
	return e.dec.StartUtt()
}

// Feed implements asr.Engine. After a peek, the utterance's audio is decoded again
// first: the peek ended pocketsphinx's utterance.
func (e *Engine) Feed(ctx context.Context, samples []float32) error {
	if err := e.resume(ctx); err != nil {
		return err
	}
	if err := e.adaptEarly(ctx); err != nil {
		return err
	}
	if err := e.resume(ctx); err != nil {
		return err
	}
	if err := e.dec.ProcessFloat(samples); err != nil {
		return err
	}
	e.audio = append(e.audio, samples...)
	return nil
}

// adaptEarly adapts within the session's first utterance (EarlyAdapt): once AdaptAfter
// of its audio was fed, the final pass decodes it on the side, and the streaming pass
// starts the utterance again from that pass's cepstral mean (resume decodes it again)
// and gives its final itself. Between Feeds, so that the audio fed stays what the
// module counts.
func (e *Engine) adaptEarly(ctx context.Context) error {
	if !e.adaptDue() || e.peeked != nil {
		return nil
	}
	dec, err := e.finalPassDecoder()
	if err != nil {
		return err
	}
	if _, err := e.finalPass(ctx, dec, e.audio); err != nil {
		return err
	}
	e.startCMN, e.passedCMN = e.passedCMN, ""
	e.own = true
	if err := e.dec.EndUtt(); err != nil {
		return err
	}
	if err := e.begin(); err != nil {
		return err
	}
	e.replay, e.replayed = true, 0
	return nil
}

// adaptDue reports whether the utterance is to adapt early: the session's first, and
// AdaptAfter of it was fed. Its final is the streaming pass's own from then on
// (OwnFinal); the next call that decodes adapts it.
func (e *Engine) adaptDue() bool {
	return !e.own && e.cfg.EarlyAdapt && e.cfg.FinalPass && e.cfg.AdaptAfter > 0 && e.passed == 0 &&
		int64(len(e.audio)) >= audio.DurationToSamples(e.cfg.AdaptAfter, audio.PipelineRate)
}

// resume decodes the utterance again from its start, from the cepstral mean it began
// with, when a peek ended it; it can be cancelled and taken up again.
func (e *Engine) resume(ctx context.Context) error {
	if e.peeked != nil {
		e.peeked = nil
		if err := e.begin(); err != nil {
			return err
		}
		e.replay, e.replayed = true, 0
	}
	for e.replay && e.replayed < len(e.audio) {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(replayPiece, len(e.audio)-e.replayed)
		if err := e.dec.ProcessFloat(e.audio[e.replayed : e.replayed+n]); err != nil {
			return err
		}
		e.replayed += n
	}
	e.replay = false
	return nil
}

// Partial implements asr.Engine.
func (e *Engine) Partial(ctx context.Context) (asr.Hypothesis, error) {
	if e.peeked != nil {
		return *e.peeked, nil
	}
	if err := e.adaptEarly(ctx); err != nil {
		return asr.Hypothesis{}, err
	}
	if err := e.resume(ctx); err != nil {
		return asr.Hypothesis{}, err
	}
	return hypothesisOf(e.dec), nil
}

// OwnFinal implements asr.Peeker: without the final pass every final is the streaming
// pass's own, with it once the streaming pass has decoded AdaptAfter of audio, or (early
// adaptation) once the session's first utterance has that much.
func (e *Engine) OwnFinal() bool { return e.own || e.adaptDue() }

// PeekFinal implements asr.Peeker: it ends pocketsphinx's utterance (its second and
// third passes, fwdflat and bestpath, run then) and keeps the result; more audio decodes
// the utterance again from its start.
func (e *Engine) PeekFinal(ctx context.Context) (asr.Hypothesis, error) {
	if e.peeked != nil {
		return *e.peeked, nil
	}
	if err := e.adaptEarly(ctx); err != nil {
		return asr.Hypothesis{}, err
	}
	if err := e.resume(ctx); err != nil {
		return asr.Hypothesis{}, err
	}
	if err := e.dec.EndUtt(); err != nil {
		return asr.Hypothesis{}, err
	}
	h := hypothesisOf(e.dec)
	e.peeked = &h
	return h, nil
}

// Final implements asr.Engine: the streaming pass's own final, or the final pass.
func (e *Engine) Final(ctx context.Context) (asr.Hypothesis, error) {
	if e.OwnFinal() {
		return e.PeekFinal(ctx)
	}
	if err := e.dec.EndUtt(); err != nil {
		return asr.Hypothesis{}, err
	}
	if len(e.audio) == 0 {
		return hypothesisOf(e.dec), nil
	}
	dec, err := e.finalPassDecoder()
	if err != nil {
		return asr.Hypothesis{}, err
	}
	h, err := e.finalPass(ctx, dec, e.audio)
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
// it before the streaming pass adapted. While the streaming pass has an utterance, or
// when it searches without the final pass's second and third passes (FastOwnFinals), the
// pass runs on a second decoder (LoadSide, or the first such call: the models once more,
// about 90 MB and 0.3 s here), so the streaming utterance's search and cepstral mean stay
// as they were.
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
	dec, err := e.finalPassDecoder()
	if err != nil {
		return asr.Hypothesis{}, err
	}
	return e.finalPass(ctx, dec, samples)
}

// finalPassDecoder is the decoder a final pass (Final's or FinalOf's) runs on: the
// streaming one when it is free (no utterance open, no peeked result to keep) and
// searches as the final pass does; otherwise the side decoder, loaded if need be.
func (e *Engine) finalPassDecoder() (*pocketsphinx.Decoder, error) {
	if !e.dec.InUtterance() && e.peeked == nil && !e.cfg.FinalPassApart() {
		return e.dec, nil
	}
	if err := e.LoadSide(); err != nil {
		return nil, err
	}
	return e.side, nil
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
// `pocketsphinx single` gives for it: normalised by their own cepstral mean, which the
// streaming pass's next utterance starts from. (Starting from the cepstral mean the
// streaming pass adapted instead measured 13 WER points worse on the shared
// recordings.) dec's cepstral mean is restored afterwards.
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
	if !e.own {
		// A warm-up: the streaming pass's next utterance starts from this mean. (The
		// module may still ask for final passes after it, of sounds over the agent's
		// voice, whose mean is the two voices'.)
		e.passed += int64(len(samples))
		e.passedCMN = dec.CMN()
	}
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
