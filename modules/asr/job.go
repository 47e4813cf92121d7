package asr

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-voice/parley/audio"
)

// The engine jobs: what one round of engine calls asks, and the worker that runs it.

// jobKind says what a job asks of the engine.
type jobKind uint8

const (
	// jobPartial feeds new audio to the streaming pass and asks for a hypothesis.
	jobPartial jobKind = iota + 1
	// jobFinal feeds the rest of the audio and ends the utterance with Final (engines
	// that are neither FinalDecoder nor Peeker).
	jobFinal
	// jobEnd decodes the utterance's final up to a given end: a Peeker whose final of
	// the utterance is its own is fed up to there and peeks, otherwise FinalOf decodes
	// the audio from the utterance's start.
	jobEnd
)

// job is one round of engine calls for the utterance at the head of the queue.
type job struct {
	seq   int
	kind  jobKind
	u     *utterance
	start bool      // call Start first (jobPartial, jobFinal, jobEnd when it may peek)
	feed  []float32 // to Feed (jobPartial, jobFinal, jobEnd when it peeks)
	from  int64     // the stream position of feed[0] (jobPartial, jobEnd)
	// origin is the stream position the utterance begins at, for a Positioned engine.
	origin int64
	// whole is the utterance's audio to its end, for FinalOf (jobEnd); peek says the
	// job asks the Peeker first.
	whole []float32
	peek  bool
	// atPause: a partial at the pause that decodes all of the speech.
	atPause bool
}

// waitedOn reports whether the user waits on j's decode (Hurried): a final, or a
// partial at the pause that will serve as one.
func (j job) waitedOn() bool { return j.kind != jobPartial || j.atPause }

type jobResult struct {
	job
	hyp     Hypothesis
	started bool     // Start was called and succeeded
	fed     int      // how much of feed was fed
	own     ownFinal // what the Peeker said of the utterance's final after Start
	err     error
}

// feedPiece is how much audio a partial job feeds at once: between pieces it sees that
// it was cancelled, so that a final decode waits at most for one piece. (pocketsphinx
// does not interrupt a Feed.)
const feedPiece = audio.PipelineRate / 10

// runJob runs on the worker, which owns the engine until it posts the result.
func runJob(ctx context.Context, eng Engine, fd FinalDecoder, pk Peeker, j job) (res jobResult) {
	res.job = j
	if h, ok := eng.(Hurried); ok {
		h.Hurry(j.waitedOn())
	}
	if p, ok := eng.(Positioned); ok {
		p.StreamAt(j.origin)
	}
	if j.start {
		if res.err = eng.Start(ctx); res.err != nil {
			res.err = fmt.Errorf("start: %w", res.err)
			return res
		}
		res.started = true
		if pk != nil {
			res.own = ownNo
			if pk.OwnFinal() {
				res.own = ownYes
			}
		}
	}
	switch {
	case j.kind == jobEnd && j.peek && pk.OwnFinal():
		if res.err = feedPieces(ctx, eng, j.feed, &res.fed); res.err != nil {
			return res
		}
		if res.hyp, res.err = pk.PeekFinal(ctx); res.err != nil {
			res.err = fmt.Errorf("final decode: %w", res.err)
		}
		res.own = ownYes
		return res
	case j.kind == jobEnd:
		if pk != nil {
			res.own = ownNo
		}
		if fd == nil {
			res.err = errors.New("final decode: the engine's final is neither its own nor FinalOf's")
			return res
		}
		if res.hyp, res.err = fd.FinalOf(ctx, j.whole); res.err != nil {
			res.err = fmt.Errorf("final decode: %w", res.err)
		}
		return res
	case j.kind == jobFinal:
		if res.err = eng.Feed(ctx, j.feed); res.err != nil {
			res.err = fmt.Errorf("feed: %w", res.err)
			return res
		}
		res.fed = len(j.feed)
		res.hyp, res.err = eng.Final(ctx)
		return res
	}
	res.err = feedPieces(ctx, eng, j.feed, &res.fed)
	if res.err == nil {
		res.hyp, res.err = eng.Partial(ctx)
	}
	if pk != nil && res.started || pk != nil && !j.start {
		// A Peeker may take over an utterance's final as it hears more of it
		// (pocketsphinx's early adaptation).
		res.own = ownNo
		if pk.OwnFinal() {
			res.own = ownYes
		}
	}
	return res
}

// feedPieces feeds samples in pieces, counting in fed what went in, and stops between
// pieces when ctx is cancelled.
func feedPieces(ctx context.Context, eng Engine, samples []float32, fed *int) error {
	for *fed < len(samples) {
		if err := ctx.Err(); err != nil {
			return err
		}
		piece := samples[*fed:min(*fed+feedPiece, len(samples))]
		if err := eng.Feed(ctx, piece); err != nil {
			return fmt.Errorf("feed: %w", err)
		}
		*fed += len(piece)
	}
	return nil
}

func (r *runner) cancelJob() {
	if r.cancel != nil {
		r.cancel()
	}
}
