package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/internal/ellipsis"
)

// Prefiller is an engine that can evaluate a prompt ahead of a generation: the LLM module
// feeds it the user's turn while they speak, so that at the end of the turn only the
// prompt format's closing remains to evaluate. The in-process llama.cpp engine is one.
type Prefiller interface {
	// Prefill evaluates prompt into the engine's cache and returns the probability that
	// it goes on with the first token of one of ends (-1 when unknown).
	Prefill(ctx context.Context, prompt string, ends []string) (PrefillResult, error)
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
