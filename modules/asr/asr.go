// Package asr is the incremental speech recognition module. It listens to the user's
// audio and to the VAD's segments, recognises each user turn with an Engine while the
// user speaks, and reports words as they become stable: ADD for a new word, REVOKE when
// the recogniser changed its mind, COMMIT of every surviving word at the end of the
// turn, followed by the whole Utterance.
//
// With an engine that decodes finals on the side (FinalDecoder) or whose streaming pass
// can give its final early (Peeker), the final decode of a turn may start before the
// turn has surely ended: when the user's speech segment ends (Config.Speculative). The
// end of turn then commits that decode's words, which are exactly those a final decode
// started at the end of turn would give.
package asr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Word is the payload of a recognised word (kind "word").
type Word struct {
	Text string
	// Start and End are stream positions (time since the start of the audio stream).
	Start, End time.Duration
	// Stability is the share of the recent hypotheses that agree on this word (and all
	// words before it): 1 for words that passed local agreement and for committed words.
	Stability float32
	// Confidence is the engine's probability for the word, 0 when it gives none (for
	// example pocketsphinx before the final decode).
	Confidence float32
	// Utterance is the ID of the utterance the word belongs to.
	Utterance int
}

// Kind implements iu.Payload.
func (Word) Kind() string { return "word" }

// Summary implements iu.Payload.
func (w Word) Summary() string {
	return fmt.Sprintf("%q %.2fs–%.2fs stability %.2f", w.Text, w.Start.Seconds(), w.End.Seconds(), w.Stability)
}

// Utterance is the payload of a whole user utterance (kind "utterance"), ADDed and
// COMMITted after the final decode at the end of the turn. It is grounded in its words.
type Utterance struct {
	ID   int
	Text string
	// Words are the committed words, in order.
	Words []Word
	// Start and End span the user's speech (from the end of turn, or the audio
	// when the input ended without one).
	Start, End time.Duration
	// AudioStart and AudioEnd span the audio that was decoded (speech plus pre-roll and
	// trailing silence).
	AudioStart, AudioEnd time.Duration
}

// Kind implements iu.Payload.
func (Utterance) Kind() string { return "utterance" }

// Summary implements iu.Payload.
func (u Utterance) Summary() string {
	return fmt.Sprintf("utterance %d %.2fs–%.2fs %q", u.ID, u.Start.Seconds(), u.End.Seconds(), u.Text)
}

// Decoded is the payload (kind "decoded") that says how far into the stream the words
// of utterance Utterance were decoded: To. A recogniser that decodes the utterance
// again every hop (whisper) has words that lag its audio by up to a hop plus a decode;
// the timeline shows by how much. One IU per utterance, updated with every hypothesis; a
// streaming pass, whose words keep up with the audio, sends none.
type Decoded struct {
	Utterance int
	To        time.Duration
}

// Kind implements iu.Payload.
func (Decoded) Kind() string { return "decoded" }

// Summary implements iu.Payload.
func (d Decoded) Summary() string {
	return fmt.Sprintf("utterance %d decoded to %.2fs", d.Utterance, d.To.Seconds())
}

// Engine recognises one utterance at a time from 16 kHz mono audio. The module calls it
// from one goroutine at a time (never concurrently), in the order Start, Feed and
// Partial any number of times, then Final; then Start again for the next utterance.
// An engine that is also a FinalDecoder may get FinalOf calls in between (still one
// call at a time), and then no Final: the module decodes the end of the turn with
// FinalOf and starts the next utterance with Start. A Peeker gets PeekFinal instead of
// Final for the utterances whose final is its own.
type Engine interface {
	// Start begins a new utterance, dropping whatever the previous one left.
	Start(ctx context.Context) error
	// Feed appends samples to the utterance.
	Feed(ctx context.Context, samples []float32) error
	// Partial returns the current hypothesis of everything fed so far.
	Partial(ctx context.Context) (Hypothesis, error)
	// Final returns the final hypothesis of the whole utterance and ends it.
	Final(ctx context.Context) (Hypothesis, error)
}

// Hurried is an Engine that can spend more of the machine on the decodes the user
// waits on: Hurry(true) comes before those (a decode at a pause that covers all of
// the speech, a final), Hurry(false) before the others. Both come from the goroutine
// that runs the engine's other calls.
type Hurried interface {
	Hurry(on bool)
}

// FinalDecoder is what the module needs from an Engine to decode the end of a turn on
// the side: speculatively, before the turn has surely ended (Config.Speculative), and
// over exactly the turn's audio, whatever the partial decodes were fed.
type FinalDecoder interface {
	// StatelessFinal reports whether FinalOf works with the engine's configuration:
	// whether its final hypothesis depends on the audio alone, not on earlier utterances
	// or on how the audio was fed.
	StatelessFinal() bool
	// FinalOf returns the final hypothesis of samples as one utterance: the same words,
	// times and confidences as Start, Feed(samples), Final. It leaves the utterance in
	// progress as it was, so that Feed and Partial carry on after it as if it had not
	// run. samples must not be changed during the call. Without StatelessFinal it
	// returns ErrStatefulFinal.
	FinalOf(ctx context.Context, samples []float32) (Hypothesis, error)
}

// Peeker is an Engine whose streaming pass gives the final hypothesis itself, for some
// utterances or all (pocketsphinx once its streaming pass has adapted to the
// microphone), and can give it before the turn has surely ended. The module then
// speculates by feeding the streaming pass the turn's audio up to the end it expects and
// peeking; if the user goes on, it simply feeds more.
type Peeker interface {
	// OwnFinal reports whether the utterance begun by the last Start ends with the
	// streaming pass's own hypothesis (PeekFinal); otherwise its final is FinalOf's.
	OwnFinal() bool
	// PeekFinal returns the final hypothesis of everything fed since Start, with the
	// words, times and confidences Final would give. The utterance stays the module's:
	// Feed after it carries on as if PeekFinal had not run (the engine may decode the
	// audio fed so far once more to do so), and Final or PeekFinal with nothing fed
	// since return the same hypothesis.
	PeekFinal(ctx context.Context) (Hypothesis, error)
}

// SideLoader is a FinalDecoder that needs resources of its own to decode a final while an
// utterance streams (pocketsphinx: a second decoder). Whoever turns speculation on loads
// them before the first turn (LoadSide), so that the first speculative final does not pay
// for them at the user's first pause.
type SideLoader interface {
	LoadSide() error
}

// QuickFinals is a FinalDecoder whose partial hypotheses decode everything fed since
// Start from nothing, as FinalOf does, only with faster settings (whisper: greedy, the
// encoder's window cut to the audio). When QuickFinals says so, the module takes the
// latest partial as an utterance's final once that partial decoded all of the speech
// (only silence, by the VAD, followed it), instead of decoding the utterance again.
type QuickFinals interface {
	QuickFinals() bool
}

// Positioned is an Engine that needs to know where in the stream an utterance's audio
// lies (the realistic bench's recogniser, which answers from a transcript aligned to the
// stream). The module tells it before each job on the utterance.
type Positioned interface {
	StreamAt(sample int64)
}

// ErrStatefulFinal is what FinalOf returns when the engine's final hypothesis depends on
// more than the audio it is given.
var ErrStatefulFinal = errors.New("asr: the engine's final hypothesis depends on more than the audio")

// Hypothesis is a recogniser's view of an utterance.
type Hypothesis struct {
	Words []HypWord
}

// Text joins the words with spaces.
func (h Hypothesis) Text() string { return JoinWords(h.Words) }

// HypWord is a word of a hypothesis.
type HypWord struct {
	Text string
	// Start and End are relative to the first sample fed for the utterance.
	Start, End time.Duration
	// Confidence is the engine's probability for the word; 0 when unknown.
	Confidence float32
}

// JoinWords joins the texts of words with single spaces.
func JoinWords(words []HypWord) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.Text)
	}
	return b.String()
}
