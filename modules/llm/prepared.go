package llm

import (
	"context"
	"errors"

	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// resume continues a confirmed turn whose generation paused after its first clause.
// When the engine dropped the paused generation meanwhile (a prefill of the user's
// words ran while the turn waited, for the end-of-turn estimate), the rest is generated
// from the prompt followed by what was generated so far: a continuation of the same
// text, if not always the tokens the paused generation would have chosen.
func (r *runner) resume(ctx context.Context, t *turn) {
	t.paused = false
	gen, p, m := t.gen, r.p, r.m
	pauser := m.engine.(Pauser)
	sofar := t.raw.String()
	again := Request{Prompt: t.prompt + sofar, Stop: t.stop, Sampling: m.cfg.Sampling}
	before := t.pieces
	if m.cfg.MaxTokens > 0 {
		again.MaxTokens = max(m.cfg.MaxTokens-before, 1)
	}
	genCtx, cancel := context.WithCancel(ctx)
	t.cancel = cancel
	p.Go(func(w iu.Worker) {
		defer cancel()
		emit := func(piece string) error { return w.Post(genCtx, genPiece{gen: gen, piece: piece}) }
		res, err := pauser.Continue(genCtx, emit)
		if errors.Is(err, ErrNothingPaused) {
			res, err = m.engine.Generate(genCtx, again, emit)
			res.Tokens += before
			res.Text = sofar + res.Text
		}
		w.Post(ctx, genDone{gen: gen, res: res, err: err})
	})
}

// confirm makes a prepared turn real once its prompt is checked: the history may have
// changed since the draft (a summary arrived), and then the reply is generated again.
func (r *runner) confirm(ctx context.Context, t *turn) {
	t.confirming = true
	gen, turnID, p, prompts := t.gen, t.turnID, r.p, r.m.prompts
	p.Go(func(w iu.Worker) {
		prompt, _, err := prompts.BuildPrompt(ctx, turnID)
		w.Post(ctx, confirmChecked{gen: gen, prompt: prompt, err: err})
	})
}

// adopt turns a checked prepared turn into a normal one: its ready clauses are
// committed, and its reply goes out if the generation already ended.
func (r *runner) adopt(ctx context.Context, t *turn) error {
	t.prepared, t.confirming, t.wasPrepared = false, false, true
	ups := make([]iu.Update, 0, len(t.ready))
	for _, u := range t.ready {
		ups = append(ups, iu.CommitOf(u))
	}
	t.ready = nil
	r.log.Debug("prepared turn confirmed", zap.Int("turn", t.turnID), zap.Int("clauses", len(ups)), zap.Bool("generated", t.done != nil))
	if err := r.p.Send(ctx, ups...); err != nil {
		return err
	}
	if t.paused {
		r.resume(ctx, t)
		return nil
	}
	if d := t.done; d != nil {
		// The clauses were settled when the generation ended.
		t.done = nil
		r.cur = nil
		t.cancel()
		return r.m.sendReply(ctx, r.p, t, d.res, d.err, nil)
	}
	return nil
}

// checked adopts a confirmed turn whose prompt is still the history's, and otherwise
// generates the turn again.
func (r *runner) checked(ctx context.Context, cur *turn, v confirmChecked) error {
	if v.err == nil && cur.prompt != "" && v.prompt == cur.prompt {
		return r.adopt(ctx, cur)
	}
	// The history changed under the draft: generate the turn again from it.
	r.log.Info("prepared turn generated again: its prompt changed", zap.Int("turn", cur.turnID), zap.Error(v.err))
	respond := cur.respond
	if err := r.withdraw(ctx, "prompt changed"); err != nil {
		return err
	}
	r.start(ctx, cur.turnID, respond, "")
	return nil
}

// withdraw drops the prepared turn: its generation stops and every IU of it is revoked.
func (r *runner) withdraw(ctx context.Context, why string) error {
	t := r.cur
	r.cur = nil
	t.cancel()
	var ups []iu.Update
	for _, u := range t.ready {
		ups = append(ups, iu.RevokeOf(u))
	}
	ups = append(ups, t.revokeOpen()...)
	tokens := t.pieces
	if t.done != nil && t.done.res.Tokens > 0 {
		tokens = t.done.res.Tokens
	}
	reply := t.reply(Result{Text: t.raw.String(), Tokens: tokens, StopReason: StopCancelled})
	reply.Withdrawn = true
	rep := r.p.NewIU(reply, t.respond)
	ups = append(ups, iu.AddOf(rep), iu.CommitOf(rep))
	r.log.Debug("prepared turn withdrawn", zap.Int("turn", t.turnID), zap.String("why", why), zap.Int("tokens", tokens))
	return r.p.Send(ctx, ups...)
}
