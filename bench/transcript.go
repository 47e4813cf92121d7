package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/pipeline"
)

// SpokenWord is a word of a scenario's speech where the stream has it.
type SpokenWord struct {
	Text string
	// Start and End are stream positions.
	Start, End time.Duration
}

// CostlyEngine is a recogniser that can be made to decode a transcript of a given length:
// a model of a real one's shape with random weights (whispercpp.Engine), whose own words
// are noise but whose decodes cost what the real model's do.
type CostlyEngine interface {
	asr.Engine
	asr.FinalDecoder
	// ForceTextTokens makes the next decode produce exactly n text tokens.
	ForceTextTokens(n int)
	// TokenCount returns how many tokens the model spells text with.
	TokenCount(text string) (int, error)
}

// Transcript is the realistic bench's recogniser: it runs every decode the ASR module
// asks for on a model of the default recogniser's shape, at the cost of the words the
// user has said so far in the audio decoded (as many text tokens as they take), and
// answers with those words, as a recogniser that hears perfectly would. Random weights
// give no words; the scenario's transcript, aligned to its audio, does, and costs
// nothing. It implements asr.Positioned, since which words lie in the audio depends on
// where in the stream the audio lies.
type Transcript struct {
	inner CostlyEngine
	words []SpokenWord
	// start is the stream sample the utterance's audio begins at, fed how many samples
	// have been fed since.
	start, fed int64
}

var (
	_ asr.Engine       = (*Transcript)(nil)
	_ asr.FinalDecoder = (*Transcript)(nil)
	_ asr.Positioned   = (*Transcript)(nil)
	_ asr.QuickFinals  = (*Transcript)(nil)
)

// NewTranscript returns the recogniser that runs decodes on inner and answers with words.
func NewTranscript(inner CostlyEngine, words []SpokenWord) *Transcript {
	return &Transcript{inner: inner, words: words}
}

// StreamAt implements asr.Positioned.
func (t *Transcript) StreamAt(sample int64) { t.start = sample }

// Start implements asr.Engine.
func (t *Transcript) Start(ctx context.Context) error {
	t.fed = 0
	return t.inner.Start(ctx)
}

// Feed implements asr.Engine.
func (t *Transcript) Feed(ctx context.Context, samples []float32) error {
	t.fed += int64(len(samples))
	return t.inner.Feed(ctx, samples)
}

// Partial implements asr.Engine.
func (t *Transcript) Partial(ctx context.Context) (asr.Hypothesis, error) {
	return t.decode(ctx, t.start, t.fed, func() (asr.Hypothesis, error) { return t.inner.Partial(ctx) })
}

// Final implements asr.Engine.
func (t *Transcript) Final(ctx context.Context) (asr.Hypothesis, error) {
	return t.decode(ctx, t.start, t.fed, func() (asr.Hypothesis, error) { return t.inner.Final(ctx) })
}

// QuickFinals implements asr.QuickFinals as the inner engine does.
func (t *Transcript) QuickFinals() bool {
	q, ok := t.inner.(asr.QuickFinals)
	return ok && q.QuickFinals()
}

// StatelessFinal implements asr.FinalDecoder.
func (t *Transcript) StatelessFinal() bool { return t.inner.StatelessFinal() }

// FinalOf implements asr.FinalDecoder: samples begin at the stream sample StreamAt gave.
func (t *Transcript) FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error) {
	return t.decode(ctx, t.start, int64(len(samples)), func() (asr.Hypothesis, error) { return t.inner.FinalOf(ctx, samples) })
}

// decode runs the inner decode at the cost of the words that lie in the n samples from
// stream sample from, and returns those words.
func (t *Transcript) decode(ctx context.Context, from, n int64, run func() (asr.Hypothesis, error)) (asr.Hypothesis, error) {
	origin := audio.SamplesToDuration(from, audio.PipelineRate)
	end := origin + audio.SamplesToDuration(n, audio.PipelineRate)
	var h asr.Hypothesis
	var texts []string
	for _, w := range t.words {
		// A word counts once most of it was heard.
		if w.End <= origin || (w.Start+w.End)/2 > end {
			continue
		}
		h.Words = append(h.Words, asr.HypWord{Text: w.Text, Start: max(w.Start-origin, 0), End: min(w.End, end) - origin, Confidence: 1})
		texts = append(texts, w.Text)
	}
	tokens := 0
	if len(texts) > 0 {
		var err error
		if tokens, err = t.inner.TokenCount(" " + strings.Join(texts, " ")); err != nil {
			return asr.Hypothesis{}, err
		}
	}
	t.inner.ForceTextTokens(tokens)
	if _, err := run(); err != nil {
		return asr.Hypothesis{}, err
	}
	return h, nil
}

// Close implements io.Closer when the inner engine does.
func (t *Transcript) Close() error {
	if c, ok := t.inner.(interface{ Close() error }); ok {
		return c.Close()
	}
	return errors.New("bench: the recogniser has no Close")
}

// TranscriptRecogniser returns the replay hook (pipeline.ReplayOptions.Recogniser) that
// makes the configured recogniser a Transcript of words: the engine must be one that can
// be made to decode a transcript's length (whisper).
func TranscriptRecogniser(words []SpokenWord) pipeline.RecogniserWrapper {
	return func(e pipeline.ASREngine) (pipeline.ASREngine, error) {
		c, ok := e.(CostlyEngine)
		if !ok {
			return nil, fmt.Errorf("bench: the recogniser %T cannot be made to decode a transcript's length (want whisper)", e)
		}
		return NewTranscript(c, words), nil
	}
}
