package asr

import (
	"context"

	"go.uber.org/zap"

	"github.com/parley-voice/parley/iu"
)

// Scheduling: which engine job is due for the utterance at the head of the queue, and
// when a final decode may start before the end of turn.

// advance commits the utterances whose final hypothesis is ready and starts the next
// engine job.
func (r *runner) advance(ctx context.Context) error {
	for {
		for len(r.queue) > 0 {
			u := r.queue[0]
			if !u.ended || u.fin == nil || !u.fin.done {
				break
			}
			if err := r.commit(ctx, u, u.fin); err != nil {
				return err
			}
		}
		// A final taken from a partial is done at once: commit it, or schedule on.
		if again, err := r.schedule(ctx); err != nil || !again {
			return err
		}
	}
}

// speculation returns the end of the audio a speculative final decode of u would cover
// now, and whether one is due: the turn's last segment has ended, Trailing audio after
// it has arrived (or a partial that decoded all the speech is done, which is the final:
// QuickFinals) and no final decode of u is running or done.
func (r *runner) speculation(u *utterance) (end int64, due bool) {
	if !r.speculate || u != r.cur || u.seg != "" && !(u.paused && (u.sure || r.peekTentative(u))) || u.segEnd < 0 || u.fin != nil {
		return 0, false
	}
	end = r.speculationEnd(u)
	return end, u.recv >= end || partialServes(r.quick, u.partial, u.spokenTo(u.segEnd))
}

// feedEnd is how far the streaming pass may be fed now. When its final may be its own
// (a Peeker), the silence after the speech stops at Trailing after it: a peek covers
// just that, as it would at the end of turn, whenever and however often partials ran,
// and the streaming pass adapts to the same audio either way.
func (r *runner) feedEnd(u *utterance) int64 {
	if r.peeker == nil || u.seg != "" && !u.paused || u.segEnd < 0 {
		return u.recv
	}
	return max(min(u.recv, r.speculationEnd(u)), u.fed)
}

// speculationEnd is the end of the audio a speculative final decode of u covers.
func (r *runner) speculationEnd(u *utterance) int64 { return max(u.segEnd+r.trailingOf(u), u.start) }

// peekTentative reports whether u's final may be decoded at a tentative pause already:
// a peek costs little, and speech that resumes after it only has the streaming pass
// decode the utterance again.
func (r *runner) peekTentative(u *utterance) bool { return r.peeks(u) && u.own == ownYes }

// peeks reports whether u's final will be a peek at the engine's streaming pass.
func (r *runner) peeks(u *utterance) bool {
	return r.peeker != nil && u.own != ownNo && !(u.overAgent && r.finalOf != nil)
}

// trailingOf is how much audio after the speech u's final covers.
func (r *runner) trailingOf(u *utterance) int64 {
	if pt := r.m.cfg.PeekTrailing; pt > 0 && r.peeks(u) && u.own == ownYes {
		return samplesOf(pt)
	}
	return r.trailing
}

// schedule starts the next engine job when none runs and one is due. It reports whether
// it took a partial decode as a final instead (QuickFinals), which is done at once.
func (r *runner) schedule(ctx context.Context) (took bool, err error) {
	if len(r.queue) == 0 {
		return false, nil
	}
	u := r.queue[0]
	if j := r.running; j != nil {
		if _, due := r.speculation(u); due && j.u == u && j.kind == jobPartial && !r.partialWillServe(j, u.spokenTo(u.segEnd)) {
			// The speculation is what the end of the turn will wait for; the partial
			// in its way is only about the silence after the speech.
			r.cancel()
		} else if j.u == u && j.kind == jobPartial && u.fin == nil && partialAtPause(r.quick, u.paused, j.from+int64(len(j.feed)), u.recv, u.spokenTo(u.segEnd)) {
			// The speech paused: the partial that decodes all of it is the final, so
			// the one that stops short of its end gives way.
			r.cancel()
		}
		return false, nil
	}
	j := job{seq: r.jobs + 1, u: u, origin: u.start}
	if u.complete(r.inputDone || r.speechEnded) {
		if u.recv < u.end {
			// The input ended before all the audio came.
			if r.decodesEnd() {
				r.setEnd(u, u.recv)
			} else {
				u.end = u.recv
			}
		}
	}
	switch specEnd, specDue := r.speculation(u); {
	case u.ended && u.fin == nil && r.finalFromPartial(u, u.end, u.spokenTo(u.untrimmedEnd()), false):
		// The turn ended and a partial decoded all its speech: that is the final,
		// whether or not the trailing audio is in.
		return true, nil
	case u.complete(r.inputDone || r.speechEnded) && !r.decodesEnd():
		j.kind, j.start, j.feed = jobFinal, !u.started, u.span(u.fed, u.recv)
		u.fed, u.started = u.recv, true
	case u.complete(r.inputDone || r.speechEnded):
		if u.fin != nil {
			return false, nil // done, and committed by advance
		}
		r.endJob(&j, u, u.end)
		u.fin = &finalDecode{seq: j.seq, end: u.end, started: r.p.Now()}
	case specDue:
		if r.finalFromPartial(u, specEnd, u.spokenTo(u.segEnd), true) {
			return true, r.earlyFinal(ctx, u)
		}
		r.endJob(&j, u, specEnd)
		u.fin = &finalDecode{seq: j.seq, end: specEnd, speculative: true, started: r.p.Now()}
		r.log.Debug("speculative final started", zap.Int("utterance", u.id), zap.Duration("audio_end", durOf(specEnd)), zap.Bool("peek", j.peek))
	case u.fin != nil, u.ended && r.decodesEnd():
		// Nothing new to hear until speech resumes (which drops the speculation), and
		// nothing to feed after the end of turn when the final decode is FinalOf.
		return false, nil
	case r.feedEnd(u)-u.fed >= r.hop, partialAtPause(r.quick, u.paused, u.fed, r.feedEnd(u), u.spokenTo(u.segEnd)):
		to := r.feedEnd(u)
		j.kind, j.start, j.feed, j.from = jobPartial, !u.started, u.span(u.fed, to), u.fed
		j.atPause = partialAtPause(r.quick, u.paused, u.fed, to, u.spokenTo(u.segEnd))
		u.fed, u.started = to, true
	default:
		return false, nil
	}
	r.jobs = j.seq
	jctx, cancel := context.WithCancel(ctx)
	r.running, r.cancel = &j, cancel
	eng, fd, pk := r.m.engine, r.finalOf, r.peeker
	r.p.Go(func(w iu.Worker) {
		res := runJob(jctx, eng, fd, pk, j)
		// The module may have stopped waiting; then nobody needs the result.
		_ = w.Post(ctx, res)
	})
	return false, nil
}

// endJob makes j the final decode of u up to end: a peek when the engine may give its
// own final of u, FinalOf of u's audio otherwise.
func (r *runner) endJob(j *job, u *utterance, end int64) {
	j.kind = jobEnd
	if r.finalOf != nil {
		j.whole = u.span(u.start, end)
	}
	if r.peeks(u) {
		j.peek, j.start, j.from = true, !u.started, u.fed
		if u.fed < end {
			j.feed = u.span(u.fed, end)
		}
	}
}
