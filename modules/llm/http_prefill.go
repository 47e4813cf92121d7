package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/parley-voice/parley/internal/ellipsis"
)

// ErrNoPrefill means the engine cannot prefill (a chat endpoint has no place for a
// partial user turn, or the server gives no token probabilities): the LLM module turns
// incremental input off for the run.
var ErrNoPrefill = errors.New("llm: the engine cannot prefill")

// prefillLogprobs is how many of the most likely next tokens a prefill asks the server
// for. The ends (the end of the user's turn, sentence punctuation) are among them
// whenever they matter: with stories260K's small vocabulary the ten likeliest tokens
// after "what time" leave out its 3 % of punctuation, the twenty likeliest hold it.
// llama-server gives any number; a server that refuses twenty answers 400, and is
// asked for fallbackLogprobs (OpenAI's completions allow 5, vLLM 20 by default): an
// end outside so short a list widens the estimate's range (NextMax) rather than
// losing it. A server that refuses those too turns prefills off.
const (
	prefillLogprobs  = 20
	fallbackLogprobs = 5
)

// Prefill implements Prefiller with a completions server that caches prompts and gives
// token probabilities (llama-server): it asks for one token after prompt with the
// probabilities of the most likely ones, so that the server evaluates the prompt into
// its cache (the generation that follows finds it there) and says how likely the ends
// come next. Next sums the listed tokens that begin one of ends; NextMax adds what the
// ends without a listed token may hold. A chat endpoint, and a server whose answer holds
// no probabilities or that refuses to give even fallbackLogprobs of them (a 400 that
// names them), make it return ErrNoPrefill, from then on without asking: every prefill
// would cost a hosted API a prompt.
func (e *HTTPEngine) Prefill(ctx context.Context, prompt string, ends []string) (res PrefillResult, err error) {
	start := time.Now()
	res.Next, res.NextMax = -1, -1
	if e.cfg.Mode == ModeChat {
		return res, fmt.Errorf("%w: %s takes chat messages, which have no partial user turn", ErrNoPrefill, e.endpoint)
	}
	if e.noPrefill.Load() {
		return res, fmt.Errorf("%w: %s gives no token probabilities", ErrNoPrefill, e.endpoint)
	}
	if prompt == "" {
		return res, errors.New("llm: prefill: empty prompt")
	}
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return res, CancelledError(ctx, nil)
	}
	defer func() { <-e.turn }()
	defer func() { res.Duration = time.Since(start) }()

	reqCtx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	var resp *http.Response
	for {
		body := completionRequest{Model: e.cfg.Model, Prompt: prompt, MaxTokens: 1}
		if len(ends) > 0 {
			body.Logprobs = prefillLogprobs
			if e.fewerLogprobs.Load() {
				body.Logprobs = fallbackLogprobs
			}
		}
		data, err := json.Marshal(body)
		if err != nil {
			return res, fmt.Errorf("llm: prefill: %w", err)
		}
		if resp, err = e.post(reqCtx, data); err == nil {
			break
		}
		var herr *HTTPError
		switch {
		case ctx.Err() != nil:
			return res, CancelledError(ctx, nil)
		case reqCtx.Err() != nil:
			return res, fmt.Errorf("%w (%v) waiting for %s to prefill", ErrIdleTimeout, e.cfg.Timeout, e.endpoint)
		case errors.As(err, &herr) && herr.StatusCode == http.StatusBadRequest && len(ends) > 0 &&
			strings.Contains(strings.ToLower(herr.Message), "logprob"):
			// A server that rejects the request for its log-probabilities (not for a
			// prompt too long, which the next words may fix): fewer, or none.
			if body.Logprobs > fallbackLogprobs {
				e.fewerLogprobs.Store(true)
				continue
			}
			e.noPrefill.Store(true)
			return res, fmt.Errorf("%w: %w", ErrNoPrefill, err)
		}
		return res, fmt.Errorf("llm: prefill: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		if ctx.Err() != nil {
			return res, CancelledError(ctx, nil)
		}
		return res, fmt.Errorf("llm: prefill: reading the answer of %s: %w", e.endpoint, err)
	}
	ans, err := parseCompletionAnswer(raw)
	if err != nil {
		return res, fmt.Errorf("llm: prefill: malformed answer from %s: %w (%q)", e.endpoint, err, e.redact(ellipsis.Cut(string(raw), 200)))
	}
	res.Tokens, res.Cached = ans.promptTokens, min(ans.cachedTokens, ans.promptTokens)
	if len(ends) == 0 {
		return res, nil
	}
	if ans.top == nil {
		e.noPrefill.Store(true)
		return res, fmt.Errorf("%w: %s answered without token probabilities", ErrNoPrefill, e.endpoint)
	}
	res.Next, res.NextMax = endProbability(ans.top, ends)
	return res, nil
}

// completionAnswer is what a prefill reads from a completions answer.
type completionAnswer struct {
	promptTokens, cachedTokens int
	// top maps the most likely first tokens to their log-probabilities; nil when the
	// answer has none.
	top map[string]float64
}

// parseCompletionAnswer reads a non-streamed completions answer. Log-probabilities
// come in llama-server's form (logprobs.content[0].top_logprobs, a list of tokens) or in
// the OpenAI completions form (logprobs.top_logprobs[0], a map from token to
// log-probability).
func parseCompletionAnswer(raw []byte) (completionAnswer, error) {
	var a struct {
		Choices []struct {
			Logprobs *struct {
				Content []struct {
					TopLogprobs []struct {
						Token   string  `json:"token"`
						Logprob float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
				TopLogprobs []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage   *usage          `json:"usage"`
		Timings *serverTimings  `json:"timings"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return completionAnswer{}, err
	}
	if len(a.Error) > 0 && string(a.Error) != "null" {
		return completionAnswer{}, fmt.Errorf("the server reported an error: %s", errorMessage(raw))
	}
	if len(a.Choices) == 0 {
		return completionAnswer{}, errors.New("no choices")
	}
	var ans completionAnswer
	if u := a.Usage; u != nil {
		ans.promptTokens, ans.cachedTokens = u.PromptTokens, u.cached()
	}
	if a.Timings != nil {
		ans.cachedTokens = max(ans.cachedTokens, a.Timings.CacheN)
	}
	lp := a.Choices[0].Logprobs
	switch {
	case lp == nil:
	case len(lp.Content) > 0 && len(lp.Content[0].TopLogprobs) > 0:
		ans.top = map[string]float64{}
		for _, t := range lp.Content[0].TopLogprobs {
			ans.top[t.Token] = t.Logprob
		}
	case len(lp.TopLogprobs) > 0 && len(lp.TopLogprobs[0]) > 0:
		ans.top = lp.TopLogprobs[0]
	}
	return ans, nil
}

// endProbability sums the probabilities of the listed tokens that begin one of ends,
// the way the in-process engine sums the first tokens of the ends. An end that no
// listed token begins may still begin with a token outside the list, at most as likely
// as the least likely listed one, and all of those together at most as likely as what
// the list leaves: pMax adds that.
func endProbability(top map[string]float64, ends []string) (p, pMax float64) {
	seen := make([]bool, len(ends))
	listed, least := 0.0, 1.0
	for tok, lp := range top {
		if tok == "" || math.IsNaN(lp) || lp > 0 {
			continue
		}
		q := math.Exp(lp)
		listed += q
		least = min(least, q)
		begins := false
		for i, end := range ends {
			if end != "" && strings.HasPrefix(end, tok) {
				seen[i], begins = true, true
			}
		}
		if begins {
			p += q
		}
	}
	unseen := 0
	for i, end := range ends {
		if end != "" && !seen[i] {
			unseen++
		}
	}
	p = min(p, 1)
	return p, min(p+min(float64(unseen)*least, max(1-listed, 0)), 1)
}
