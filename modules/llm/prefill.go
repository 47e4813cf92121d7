package llm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/iu"
)

// Prefiller is an engine that can evaluate a prompt ahead of a generation: the LLM module
// feeds it the user's turn while they speak, so that at the end of the turn only the
// prompt format's closing remains to evaluate. The in-process llama.cpp engine is one.
type Prefiller interface {
	// Prefill evaluates prompt into the engine's cache and returns the probability that
	// it goes on with the first token of one of ends (-1 when unknown).
	Prefill(ctx context.Context, prompt string, ends []string) (PrefillResult, error)
}

// ClosingPrefiller is a Prefiller that evaluates the prompt format's closing after the
// prompt in the same pass (PrefillClosing: Prefill, then closing after prompt). An
// in-process model reads all its weights for each pass, however few the tokens, so the
// words a recogniser adds and the closing after them cost one pass instead of two.
type ClosingPrefiller interface {
	PrefillClosing(ctx context.Context, prompt string, ends []string, closing string) (PrefillResult, error)
}

// PrefillResult describes a Prefill.
type PrefillResult struct {
	// Tokens is the prompt's length; Cached how many of its tokens were already in the
	// engine's cache (the rest was evaluated).
	Tokens, Cached int
	// Next is the probability that one of the ends comes next, or -1. NextMax is the
	// most it can be: an engine that sees only the likeliest tokens (a server's list)
	// counts the ends it does not see as zero, though they may hold up to the least
	// likely listed token's probability each. It equals Next when the engine saw every
	// token's probability.
	Next, NextMax float64
	// Duration is the whole call, waiting for the engine included.
	Duration time.Duration
}

// TurnEnds is what the estimate that the user's words are complete sums the
// probability of, after the words: the prompt format's closing of the user's turn, or
// sentence punctuation (recognisers write none, and a chat model would write it before
// ending the turn).
func TurnEnds(closing string) []string {
	return []string{closing, ".", "?", "!"}
}

// TurnCompletion is the payload of the LLM module's estimate that the user's turn is
// complete (kind "turn-completion"): after the recogniser's words Text, the model gives
// probability P to what ends it: the prompt format's end of the user's turn, or sentence
// punctuation (recognisers write none, and a chat model would put it before the end of
// the turn). ADDed and COMMITted together, one per prefill. PMax is the most P can be
// (see PrefillResult.NextMax).
type TurnCompletion struct {
	// Utterance is the recogniser's utterance the words belong to.
	Utterance int
	Text      string
	P, PMax   float64
	// Tokens and Evaluated say how long the prompt was and how much of it this prefill
	// had to evaluate.
	Tokens, Evaluated int
}

// Kind implements iu.Payload.
func (TurnCompletion) Kind() string { return "turn-completion" }

// Summary implements iu.Payload.
func (c TurnCompletion) Summary() string {
	p := fmt.Sprintf("%.3f", c.P)
	if c.PMax > c.P {
		p = fmt.Sprintf("%.3f–%.3f", c.P, c.PMax)
	}
	return fmt.Sprintf("p(end of turn)=%s after %q (%d of %d tokens evaluated)", p, ellipsis.Cut(c.Text, 60), c.Evaluated, c.Tokens)
}

// TurnCompletion implements turnend.Completion.
func (c TurnCompletion) TurnCompletion() (text string, p, pMax float64) {
	return c.Text, c.P, c.PMax
}

// draftTurn is the turn id drafts are built for: later than any stored turn, so a
// draft shows the whole history (the id itself never appears in a prompt).
const draftTurn = 1 << 30

// maybePrefill feeds the user's current words to the engine when it is free.
func (r *runner) maybePrefill(ctx context.Context) {
	if r.prefiller == nil || !r.prefillWanted || r.prefilling != nil || r.inputDone {
		return
	}
	if r.cur != nil && !(r.cur.prepared && (r.cur.done != nil || r.cur.paused)) {
		return // the engine is generating; the words wait
	}
	var words []string
	for _, w := range r.words.Words() {
		words = append(words, w.Text)
	}
	text := strings.Join(words, " ")
	r.prefillWanted = false
	if text == "" || text == r.prefilled {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	r.prefilling = cancel
	utt, drafts, eng, p := r.utterance, r.drafts, r.prefiller, r.p
	estimate := !r.m.cfg.NoEstimate
	p.Go(func(w iu.Worker) {
		defer cancel()
		prefix, closing, _, err := drafts.DraftPrompt(pctx, draftTurn, text)
		if err != nil {
			w.Post(ctx, prefillDone{utterance: utt, text: text, err: err})
			return
		}
		var ends []string
		if estimate {
			ends = TurnEnds(closing)
		}
		// The closing too, so that a reply prepared for these words starts at once: its
		// prompt is this one, evaluated to the end. New words roll it back.
		if cp, ok := eng.(ClosingPrefiller); ok {
			res, err := cp.PrefillClosing(pctx, prefix, ends, closing)
			w.Post(ctx, prefillDone{utterance: utt, text: text, res: res, err: err})
			if err == nil {
				w.Post(ctx, prefillDone{utterance: utt, text: text, closed: true})
			}
			return
		}
		res, err := eng.Prefill(pctx, prefix, ends)
		w.Post(ctx, prefillDone{utterance: utt, text: text, res: res, err: err})
		if err != nil {
			return
		}
		_, err = eng.Prefill(pctx, prefix+closing, nil)
		w.Post(ctx, prefillDone{utterance: utt, text: text, err: err, closed: true})
	})
}

// cancelPrefill stops a running prefill: a generation must not wait for it.
func (r *runner) cancelPrefill() {
	if r.prefilling != nil {
		r.prefilling()
		r.prefillWanted = true // its words may still be worth feeding later
	}
}
