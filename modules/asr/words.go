package asr

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// The outgoing IUs: what a job's hypothesis makes of the utterance's words, and the
// final words and Utterance at its commit.

// result takes in a job's outcome on the module's goroutine.
func (r *runner) result(ctx context.Context, res jobResult) error {
	r.running = nil
	r.cancel()
	u := res.u
	if res.own != ownUnknown {
		u.own = res.own
	}
	switch res.kind {
	case jobEnd:
		if res.start && res.started {
			u.started = true
		}
		if res.own == ownYes {
			// The streaming pass was fed for the peek, whatever became of it.
			u.fed = max(u.fed, res.from+int64(res.fed))
		}
		f := u.fin
		if f == nil || f.seq != res.seq {
			// A speculation dropped meanwhile: nobody needs its result.
			if res.err != nil && !errors.Is(res.err, context.Canceled) {
				r.log.Warn("dropped speculative final failed", zap.Int("utterance", u.id), zap.Error(res.err))
			}
			return nil
		}
		if res.err != nil {
			return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
		}
		f.done, f.hyp = true, res.hyp
		if f.speculative {
			r.log.Debug("speculative final done", zap.Int("utterance", u.id), zap.Bool("turn_ended", u.ended),
				zap.Duration("took", r.p.Now().Sub(f.started)))
			return r.earlyFinal(ctx, u)
		}
		return nil // advance commits it once the end of turn confirmed it
	case jobFinal:
		if res.err != nil {
			return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
		}
		return r.commit(ctx, u, &finalDecode{done: true, hyp: res.hyp, started: u.eotAt})
	}
	if res.start && !res.started {
		u.started = false
	}
	if res.fed < len(res.feed) {
		// Cancelled between pieces: the rest goes with the next job.
		u.fed = min(res.from+int64(res.fed), u.recv)
	}
	if res.err != nil {
		if errors.Is(res.err, context.Canceled) && ctx.Err() == nil {
			return nil // a partial made obsolete by the end of turn or a speculation
		}
		return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
	}
	if r.quick {
		u.partial = partialDecode{end: res.from + int64(res.fed), hyp: res.hyp, done: true}
	}
	stable, rest, restStab := u.agree.Update(res.hyp.Words)
	target := make([]Word, 0, len(stable)+len(rest))
	for _, w := range stable {
		target = append(target, r.word(u, w, 1))
	}
	if r.m.cfg.EmitUnstable {
		for i, w := range rest {
			target = append(target, r.word(u, w, restStab[i]))
		}
	}
	return r.reconcile(ctx, u, target, false, res.from+int64(res.fed))
}

// earlyFinal reports the words of u's speculative final as soon as it is done, before the
// end of turn (Config.EarlyFinal): they are what the turn will most likely end with.
func (r *runner) earlyFinal(ctx context.Context, u *utterance) error {
	f := u.fin
	if !r.m.cfg.EarlyFinal || u.ended || f == nil || !f.done {
		return nil
	}
	target := make([]Word, len(f.hyp.Words))
	for i, w := range f.hyp.Words {
		target[i] = r.word(u, w, 1)
	}
	return r.reconcile(ctx, u, target, false, f.end)
}

// commit sends the final words and the Utterance of u, the head of the queue.
func (r *runner) commit(ctx context.Context, u *utterance, f *finalDecode) error {
	r.queue[0] = nil
	r.queue = r.queue[1:]
	now := r.p.Now()
	r.log.Debug("utterance committed", zap.Int("utterance", u.id), zap.Bool("speculative", f.speculative),
		zap.Duration("end_of_turn_to_commit", now.Sub(u.eotAt)),
		zap.Duration("decode_started_before_end_of_turn", u.eotAt.Sub(f.started)))
	target := make([]Word, len(f.hyp.Words))
	for i, w := range f.hyp.Words {
		target[i] = r.word(u, w, 1)
	}
	return r.reconcile(ctx, u, target, true, f.end)
}

func (r *runner) word(u *utterance, w HypWord, stability float32) Word {
	base := durOf(u.start)
	return Word{
		Text:       w.Text,
		Start:      base + w.Start,
		End:        base + w.End,
		Stability:  stability,
		Confidence: w.Confidence,
		Utterance:  u.id,
	}
}

// reconcile makes the utterance's word IUs say target: words after the first difference
// are revoked and the rest of target added; kept words are updated when their stability
// changed. A final reconcile commits every word and adds the Utterance. to is the stream
// position the hypothesis was decoded up to (the Decoded IU).
func (r *runner) reconcile(ctx context.Context, u *utterance, target []Word, final bool, to int64) error {
	k := 0
	for k < len(u.words) && k < len(target) && SameWord(u.words[k].word.Text, target[k].Text) {
		k++
	}
	// One batch says the whole new hypothesis, revoked words first: its consumers act on
	// hypotheses, and one that lost its last words and is about to gain others is not
	// one to prepare a reply for. (The runtime chains the new words after the last
	// surviving one.)
	var ups []iu.Update
	for i := len(u.words) - 1; i >= k; i-- {
		ups = append(ups, iu.RevokeOf(u.words[i].u))
	}
	u.words = u.words[:k]
	for i := range u.words {
		e := &u.words[i]
		if final && e.word != target[i] || !final && e.word.Stability != target[i].Stability {
			e.word = target[i]
			ups = append(ups, iu.UpdateOf(e.u, e.word))
			e.u.Payload = e.word
		}
	}
	for _, w := range target[k:] {
		nu := r.p.NewIU(w, u.grounding(samplesOf(w.Start), samplesOf(w.End))...)
		u.words = append(u.words, emitted{u: nu, word: w})
		ups = append(ups, iu.AddOf(nu))
	}
	ups = r.decoded(u, ups, final, to)
	if final {
		utt := Utterance{
			ID:         u.id,
			Words:      make([]Word, len(u.words)),
			AudioStart: durOf(u.start),
			AudioEnd:   durOf(u.end),
			Start:      durOf(u.start),
			End:        durOf(u.end),
		}
		if u.speechStart >= 0 {
			utt.Start, utt.End = durOf(u.speechStart), durOf(u.speechEnd)
		}
		ids := make([]iu.ID, len(u.words))
		hw := make([]HypWord, len(u.words))
		for i, e := range u.words {
			ups = append(ups, iu.CommitOf(e.u))
			utt.Words[i] = e.word
			ids[i] = e.u.ID
			hw[i] = HypWord{Text: e.word.Text}
		}
		utt.Text = JoinWords(hw)
		uu := r.p.NewIU(utt, ids...)
		ups = append(ups, iu.AddOf(uu), iu.CommitOf(uu))
	}
	if err := r.p.Send(ctx, ups...); err != nil {
		return fmt.Errorf("asr: %w", err)
	}
	return nil
}

// decoded appends the update of u's Decoded IU: how far its words reach, after a
// hypothesis decoded up to to; the final commits it. Only for an engine without a
// streaming pass: a Peeker's words keep up with its audio.
func (r *runner) decoded(u *utterance, ups []iu.Update, final bool, to int64) []iu.Update {
	if r.peeker != nil {
		return ups
	}
	if final {
		if u.decoded != nil {
			ups = append(ups, iu.CommitOf(*u.decoded))
		}
		return ups
	}
	d := Decoded{Utterance: u.id, To: durOf(to)}
	if u.decoded == nil {
		nu := r.p.NewIU(d)
		u.decoded = &nu
		return append(ups, iu.AddOf(nu))
	}
	if u.decoded.Payload == iu.Payload(d) {
		return ups
	}
	u.decoded.Payload = d
	return append(ups, iu.UpdateOf(*u.decoded, d))
}
