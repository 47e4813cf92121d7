// Package llamacpp is the LLM module's in-process engine: llama.cpp through
// engines/llama, with KV prefix reuse. Package llm stays pure Go; pipeline (and the
// tools in cmd/agent) open this engine and hand it to llm.NewModule.
package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/modules/llm"
)

// Config configures the in-process llama.cpp engine.
type Config struct {
	// ModelPath is the GGUF file to load when New gets no model.
	ModelPath string
	// Model configures loading from ModelPath.
	Model llama.ModelParams
	// Context configures the inference context. NCtx 0 means the model's training
	// context, at most DefaultMaxContext tokens.
	Context llama.ContextParams
	// NoPrefixCache evaluates every prompt from the start instead of reusing the KV cache
	// of the previous prompt (for measurements).
	NoPrefixCache bool
}

// Compile-time checks of the contracts other packages rely on.
var (
	_ llm.Engine           = (*Engine)(nil)
	_ llm.Pauser           = (*Engine)(nil)
	_ llm.ClosingPrefiller = (*Engine)(nil)
	_ llm.Tokenizer        = (*llama.Model)(nil)
)

// DefaultMaxContext caps the default context length: large models are trained on
// contexts far longer than a spoken dialogue needs, and the KV cache grows with it.
const DefaultMaxContext = 4096

// Engine generates with llama.cpp in this process. It keeps the previous prompt and
// generation in the KV cache and evaluates only the part of a new prompt that differs,
// so a dialogue whose history grows by appending costs only the new turn.
//
// Generations run one at a time; the engine owns its llama context.
type Engine struct {
	model     *llama.Model
	ownsModel bool
	cfg       Config

	// turn is held by the one goroutine that uses lctx and cache: a generation, a
	// session save or load, or Close.
	turn  chan struct{}
	lctx  *llama.Context
	cache []llama.Token // the tokens in sequence 0 of lctx, at positions 0..len-1
	// logitsAt is len(cache) when the context's current logits are those of the cache's
	// last token (a Prefill left them), else -1.
	logitsAt int
	closed   bool
	// paused is the generation its consumer paused (llm.ErrPause), kept for Continue
	// until the engine does anything else (dropPaused).
	paused *generation

	mu     sync.Mutex // guards cancel
	cancel context.CancelFunc
}

// New returns an in-process engine for m, which the caller keeps and closes
// after the engine. With a nil m it loads cfg.ModelPath and closes it with the engine.
func New(m *llama.Model, cfg Config) (*Engine, error) {
	owns := false
	if m == nil {
		if cfg.ModelPath == "" {
			return nil, errors.New("llm: llama engine: no model and no model path")
		}
		var err error
		if m, err = llama.LoadModel(cfg.ModelPath, cfg.Model); err != nil {
			return nil, fmt.Errorf("llm: llama engine: %w", err)
		}
		owns = true
	}
	cp := cfg.Context
	if err := CheckContext(m, cp.NCtx, 1); err != nil {
		if owns {
			m.Close()
		}
		return nil, fmt.Errorf("llm: llama engine: context: %w", err)
	}
	if cp.NCtx == 0 {
		cp.NCtx = min(m.ContextTrainSize(), DefaultMaxContext)
	}
	lctx, err := llama.NewContext(m, cp)
	if err != nil {
		if owns {
			m.Close()
		}
		return nil, fmt.Errorf("llm: llama engine: %w", err)
	}
	return &Engine{model: m, ownsModel: owns, cfg: cfg, lctx: lctx, turn: make(chan struct{}, 1), logitsAt: -1}, nil
}

// Open loads a GGUF model and returns an engine that owns it.
func Open(path string, cfg Config) (*Engine, error) {
	cfg.ModelPath = path
	return New(nil, cfg)
}

// Model returns the engine's model.
func (e *Engine) Model() *llama.Model { return e.model }

// Tokenizer returns the model's tokenizer, for the dialogue history.
func (e *Engine) Tokenizer() llm.Tokenizer { return e.model }

// ContextSize returns the context length in tokens.
func (e *Engine) ContextSize() int { return e.lctx.NCtx() }

// acquire waits for the engine's turn.
func (e *Engine) acquire(ctx context.Context) error {
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if e.closed {
		<-e.turn
		return llm.ErrClosed
	}
	return nil
}

func (e *Engine) release() { <-e.turn }

// Close cancels a generation in progress, waits for it and frees the engine.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.cancel != nil {
		e.cancel()
	}
	e.mu.Unlock()
	e.turn <- struct{}{}
	defer e.release()
	if e.closed {
		return nil
	}
	e.dropPaused()
	e.closed = true
	err := e.lctx.Close()
	if e.ownsModel {
		err = errors.Join(err, e.model.Close())
	}
	return err
}

// Reset forgets the cached prompt, so the next generation evaluates its whole prompt.
func (e *Engine) Reset(ctx context.Context) error {
	if err := e.acquire(ctx); err != nil {
		return err
	}
	defer e.release()
	e.dropPaused()
	e.cache = e.cache[:0]
	e.logitsAt = -1
	return e.lctx.Clear()
}

// SaveSession writes the KV cache and the tokens it holds to path, so that a later
// LoadSession (same model) resumes without evaluating the dialogue again.
func (e *Engine) SaveSession(ctx context.Context, path string) error {
	if err := e.acquire(ctx); err != nil {
		return err
	}
	defer e.release()
	e.dropPaused()
	if len(e.cache) == 0 {
		return errors.New("llm: save session: nothing cached")
	}
	if err := e.lctx.SaveSeqStateFile(path, 0, e.cache); err != nil {
		return fmt.Errorf("llm: save session: %w", err)
	}
	return nil
}

// LoadSession restores what SaveSession wrote.
func (e *Engine) LoadSession(ctx context.Context, path string) error {
	if err := e.acquire(ctx); err != nil {
		return err
	}
	defer e.release()
	e.dropPaused()
	if err := e.lctx.Clear(); err != nil {
		return err
	}
	e.cache = e.cache[:0]
	e.logitsAt = -1
	toks, err := e.lctx.LoadSeqStateFile(path, 0, e.lctx.NCtx())
	if err != nil {
		return fmt.Errorf("llm: load session: %w", err)
	}
	if got := e.lctx.SeqPosMax(0) + 1; got != len(toks) {
		e.lctx.Clear()
		return fmt.Errorf("llm: load session %s: state holds %d positions for %d tokens", path, got, len(toks))
	}
	e.cache = toks
	return nil
}

// CachedTokens returns how many tokens the KV cache holds. It waits for a generation in
// progress.
func (e *Engine) CachedTokens() int {
	if e.acquire(context.Background()) != nil {
		return 0
	}
	defer e.release()
	return len(e.cache)
}

// Generate implements Engine.
func (e *Engine) Generate(ctx context.Context, req llm.Request, emit func(string) error) (llm.Result, error) {
	if err := e.acquire(ctx); err != nil {
		if errors.Is(err, llm.ErrClosed) {
			return llm.Result{StopReason: llm.StopError}, err
		}
		return llm.Result{StopReason: llm.StopCancelled}, llm.CancelledError(ctx, nil)
	}
	defer e.release()
	e.dropPaused()
	g := &generation{e: e, req: req, start: time.Now(), logitsAt: e.logitsAt}
	// Every generation decodes, so the logits a Prefill left are gone after it.
	e.logitsAt = -1
	return e.drive(ctx, g, emit, g.run)
}

// Continue implements llm.Pauser: the paused generation goes on from its next token.
func (e *Engine) Continue(ctx context.Context, emit func(string) error) (llm.Result, error) {
	if err := e.acquire(ctx); err != nil {
		if errors.Is(err, llm.ErrClosed) {
			return llm.Result{StopReason: llm.StopError}, err
		}
		return llm.Result{StopReason: llm.StopCancelled}, llm.CancelledError(ctx, nil)
	}
	defer e.release()
	g := e.paused
	if g == nil {
		return llm.Result{StopReason: llm.StopError}, llm.ErrNothingPaused
	}
	e.paused = nil
	g.res.StopReason = ""
	return e.drive(ctx, g, emit, g.loop)
}

// drive runs step (a generation's start or its continuation) with ctx and emit, which
// Close can cancel, and keeps the generation if it paused.
func (e *Engine) drive(ctx context.Context, g *generation, emit func(string) error, step func() error) (llm.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.mu.Lock()
	e.cancel = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.cancel = nil
		e.mu.Unlock()
	}()
	g.ctx, g.emit = ctx, emit
	err := step()
	g.res.Duration = time.Since(g.start)
	if g.res.StopReason == "" {
		g.res.StopReason = llm.StopError
	}
	if g.res.StopReason == llm.StopPaused && err == nil {
		e.paused = g
	} else {
		g.close()
	}
	return g.res, err
}

// dropPaused forgets the paused generation: the engine is about to do something else.
func (e *Engine) dropPaused() {
	if e.paused != nil {
		e.paused.close()
		e.paused = nil
	}
}

// Prefill implements llm.Prefiller: it evaluates prompt into the KV cache without
// generating, so that a later Generate whose prompt starts with it evaluates only the
// rest. The user's turn is fed this way while they still speak: each call reuses the
// longest prefix the cache holds (a changed word rolls the cache back to the last shared
// token) and evaluates the new tokens. It also returns the model's probability that the
// text goes on with one of ends (the prompt format's end of the user's turn, sentence
// punctuation): the sum over their distinct first tokens, read from the logits the
// evaluation computes anyway; -1 when no end's first token stands apart from the prompt.
func (e *Engine) Prefill(ctx context.Context, prompt string, ends []string) (llm.PrefillResult, error) {
	return e.PrefillClosing(ctx, prompt, ends, "")
}

// PrefillClosing implements llm.ClosingPrefiller: Prefill, and closing after prompt in
// the same batch (when prompt's tokens begin prompt+closing's), so that the user's new
// words and the prompt format's closing cost one pass over the weights instead of two
// (BenchmarkPrefillWords). Without ends it only evaluates what the cache lacks.
func (e *Engine) PrefillClosing(ctx context.Context, prompt string, ends []string, closing string) (llm.PrefillResult, error) {
	start := time.Now()
	res := llm.PrefillResult{Next: -1, NextMax: -1}
	if err := e.acquire(ctx); err != nil {
		if errors.Is(err, llm.ErrClosed) {
			return res, err
		}
		return res, llm.CancelledError(ctx, nil)
	}
	defer e.release()
	e.dropPaused()
	if ctx.Err() != nil {
		return res, llm.CancelledError(ctx, nil)
	}
	toks, err := e.model.Tokenize(prompt, true, true)
	if err != nil {
		return res, fmt.Errorf("llm: prefill: %w", err)
	}
	if len(toks) == 0 {
		return res, errors.New("llm: prefill: empty prompt")
	}
	// closed is prompt+closing's tokens; tail, the closing's, when they follow prompt's.
	var closed, tail []llama.Token
	if closing != "" {
		if closed, err = e.model.Tokenize(prompt+closing, true, true); err != nil {
			return res, fmt.Errorf("llm: prefill: %w", err)
		}
		if commonPrefix(toks, closed) == len(toks) {
			tail = closed[len(toks):]
		}
	}
	var endToks []llama.Token
	for _, end := range ends {
		if end == "" {
			continue
		}
		full := closed
		if end != closing {
			if full, err = e.model.Tokenize(prompt+end, true, true); err != nil {
				return res, fmt.Errorf("llm: prefill: %w", err)
			}
		}
		if commonPrefix(toks, full) == len(toks) && len(full) > len(toks) && !slices.Contains(endToks, full[len(toks)]) {
			endToks = append(endToks, full[len(toks)])
		}
	}
	if max(len(toks), len(closed)) >= e.lctx.NCtx() {
		return res, fmt.Errorf("%w: %d tokens, context %d", llm.ErrPromptTooLong, max(len(toks), len(closed)), e.lctx.NCtx())
	}
	res.Tokens = len(toks)
	if len(endToks) == 0 {
		// Nothing to estimate: the cache need only hold the prompt and the closing.
		target := toks
		if closed != nil {
			target = closed
		}
		n, err := e.hold(ctx, target)
		res.Cached = min(n, len(toks))
		res.Duration = time.Since(start)
		return res, err
	}
	estimate := -1 // the output holding the logits after prompt
	n := commonPrefix(e.cache, toks)
	if n < len(toks) || len(e.cache) != len(toks) || e.logitsAt != len(toks) {
		// The last token is evaluated again unless its logits are the current ones.
		n = min(n, len(toks)-1)
		target := toks
		if tail != nil {
			// One batch, whose outputs are the prompt's last token and the closing's.
			target = closed
		}
		var to int
		if n, to, err = e.evaluate(ctx, target, n, len(toks)-1); err != nil {
			return res, err
		}
		if to == len(closed) {
			closed = nil
		}
		if to > len(toks) {
			estimate = -2 // the closing's last token is the last output
		}
	}
	res.Cached = n
	logits, err := e.lctx.Logits(estimate)
	if err != nil {
		return res, fmt.Errorf("llm: prefill: %w", err)
	}
	res.Next = probabilityOf(logits, endToks)
	res.NextMax = res.Next
	if closed != nil {
		// The closing is still to evaluate: the prompt was there already, or the
		// closing's first token merges with the prompt's last.
		if _, err := e.hold(ctx, closed); err != nil {
			return res, err
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// hold makes the cache hold target with its last token's logits current, evaluating what
// it lacks; it returns how many of target's tokens it kept.
func (e *Engine) hold(ctx context.Context, target []llama.Token) (int, error) {
	n := commonPrefix(e.cache, target)
	if n == len(target) && len(e.cache) == n && e.logitsAt == n {
		return n, nil
	}
	// The last token is evaluated again unless its logits are the current ones.
	n, _, err := e.evaluate(ctx, target, min(n, len(target)-1), -1)
	return n, err
}

// evaluate makes the cache hold target from its n-th token on: it rolls the cache back
// to n tokens (to none when that fails) and evaluates the rest in one batch that also
// outputs the logits of target[keep] (Logits(-2)) when keep is among them. When target
// goes on past keep further than one batch holds, it stops after keep. It returns the
// tokens it kept and how much of target the cache holds.
func (e *Engine) evaluate(ctx context.Context, target []llama.Token, n, keep int) (kept, to int, err error) {
	if n < len(e.cache) {
		if err := e.lctx.SeqRemove(0, n, -1); err != nil {
			if err := e.lctx.Clear(); err != nil {
				return 0, 0, fmt.Errorf("llm: prefill: %w", err)
			}
			n = 0
		}
		e.cache = e.cache[:n]
	}
	if keep >= n && len(target)-n > e.lctx.NBatch() {
		target = target[:keep+1]
	}
	e.logitsAt = -1
	batch := target[n:]
	if keep >= n && keep < len(target)-1 {
		err = e.lctx.DecodeTokensKeeping(ctx, 0, n, batch, keep-n)
	} else {
		err = e.lctx.DecodeTokens(ctx, 0, n, batch)
	}
	if err != nil {
		e.resync(target)
		if errors.Is(err, llama.ErrAborted) && ctx.Err() != nil {
			return n, 0, llm.CancelledError(ctx, nil)
		}
		return n, 0, fmt.Errorf("llm: prefill: %w", err)
	}
	e.cache = append(e.cache, batch...)
	e.logitsAt = len(e.cache)
	return n, len(target), nil
}

// probabilityOf returns the probability of any of tokens under logits.
func probabilityOf(logits []float32, tokens []llama.Token) float64 {
	m := logits[0]
	for _, v := range logits {
		m = max(m, v)
	}
	var sum, p float64
	for _, v := range logits {
		sum += math.Exp(float64(v - m))
	}
	for _, t := range tokens {
		if int(t) >= 0 && int(t) < len(logits) {
			p += math.Exp(float64(logits[t] - m))
		}
	}
	return p / sum
}

// generation is the state of one Generate call, and of the Continue calls after it
// paused.
type generation struct {
	e     *Engine
	ctx   context.Context
	req   llm.Request
	emit  func(string) error
	start time.Time
	res   llm.Result
	text  *llm.TextStream
	// sampler chooses the tokens; it lives as long as the generation (a paused one
	// keeps it for Continue). close frees it.
	sampler *llama.Sampler
	piece   []byte
	// logitsAt is the engine's logitsAt when the generation began.
	logitsAt int
}

// close frees what the generation holds.
func (g *generation) close() {
	if g.sampler != nil {
		g.sampler.Close()
		g.sampler = nil
	}
}

// run evaluates the prompt and generates.
func (g *generation) run() error {
	e, ctx := g.e, g.ctx
	prompt, err := e.model.Tokenize(g.req.Prompt, true, true)
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	nCtx := e.lctx.NCtx()
	if len(prompt) == 0 {
		return errors.New("llm: empty prompt")
	}
	if len(prompt) >= nCtx {
		return fmt.Errorf("%w: %d tokens, context %d", llm.ErrPromptTooLong, len(prompt), nCtx)
	}
	g.res.PromptTokens = len(prompt)

	// Reuse the longest common prefix with what the cache holds; the last prompt token is
	// evaluated again because its logits are needed, unless a Prefill of exactly this
	// prompt left them.
	n := 0
	if !e.cfg.NoPrefixCache {
		n = commonPrefix(e.cache, prompt)
	}
	if n < len(prompt) || len(e.cache) != len(prompt) || g.logitsAt != len(prompt) {
		n = min(n, len(prompt)-1)
	}
	if n < len(e.cache) || e.cfg.NoPrefixCache {
		if err := e.lctx.SeqRemove(0, n, -1); err != nil {
			// Recurrent memories cannot drop a tail: start over.
			if err := e.lctx.Clear(); err != nil {
				return fmt.Errorf("llm: %w", err)
			}
			n = 0
		}
		e.cache = e.cache[:n]
	}
	g.res.CachedTokens = n
	if err := e.lctx.DecodeTokens(ctx, 0, n, prompt[n:]); err != nil {
		e.resync(prompt)
		return g.decodeFailed("evaluating the prompt", err)
	}
	e.cache = append(e.cache, prompt[n:]...)
	g.res.PromptEval = time.Since(g.start)

	sampler, err := llama.NewSampler(samplerParams(g.req.Sampling, e.model.VocabSize()))
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	g.sampler = sampler
	if rp := g.req.Sampling.RepeatPenalty; rp > 0 && rp != 1 {
		// Penalties look at recent text, and the prompt is recent text (as in llama.cpp's tools).
		lastN := g.req.Sampling.RepeatLastN
		if lastN <= 0 {
			lastN = 64
		}
		for _, t := range prompt[max(0, len(prompt)-lastN):] {
			sampler.Accept(t)
		}
	}

	g.text = llm.NewTextStream(g.req.Stop)
	return g.loop()
}

// loop generates tokens until the generation ends or pauses.
func (g *generation) loop() error {
	e, ctx, sampler := g.e, g.ctx, g.sampler
	nCtx := e.lctx.NCtx()
	loopStart, tokensBefore := time.Now(), g.res.Tokens
	defer func() {
		g.res.Text = g.text.Text()
		g.res.TokensPerSecond = llm.TokensPerSecond(g.res.Tokens-tokensBefore, time.Since(loopStart))
	}()
	for {
		if ctx.Err() != nil {
			g.res.StopReason = llm.StopCancelled
			return llm.CancelledError(ctx, nil)
		}
		tok, err := sampler.Sample(e.lctx, -1)
		if err != nil {
			return fmt.Errorf("llm: %w", err)
		}
		if g.res.Tokens == 0 {
			g.res.TimeToFirstToken = time.Since(g.start)
		}
		if e.model.IsEOG(tok) {
			g.res.StopReason = llm.StopEOG
			if err := g.flush(); err != nil {
				return err
			}
			// The end token usually follows the reply in the next prompt too.
			g.keep(tok)
			return nil
		}
		g.res.Tokens++
		g.piece = e.model.AppendPiece(g.piece[:0], tok)
		out, stopped := g.text.Push(string(g.piece))
		pause := false
		if out != "" {
			if ctx.Err() != nil {
				g.res.StopReason = llm.StopCancelled
				return llm.CancelledError(ctx, nil)
			}
			if err := g.emit(out); errors.Is(err, llm.ErrPause) {
				pause = true
			} else if err != nil {
				g.res.StopReason = llm.StopCancelled
				return llm.CancelledError(ctx, err)
			}
		}
		switch {
		case stopped:
			g.res.StopReason = llm.StopString
			g.keep(tok)
			return nil
		case g.req.MaxTokens > 0 && g.res.Tokens >= g.req.MaxTokens, len(e.cache)+1 >= nCtx:
			g.res.StopReason = llm.StopLength
			if err := g.flush(); err != nil {
				return err
			}
			g.keep(tok)
			return nil
		}
		if err := e.lctx.DecodeTokens(ctx, 0, len(e.cache), []llama.Token{tok}); err != nil {
			e.resync(append(e.cache, tok))
			return g.decodeFailed("decoding", err)
		}
		e.cache = append(e.cache, tok)
		if pause {
			// The next token is sampled from the logits this decode left: Continue.
			g.res.StopReason = llm.StopPaused
			return nil
		}
	}
}

// flush emits the text held back at the end of a generation that was not cut by a stop string.
func (g *generation) flush() error {
	if out := g.text.Flush(); out != "" {
		if g.ctx.Err() != nil {
			g.res.StopReason = llm.StopCancelled
			return llm.CancelledError(g.ctx, nil)
		}
		// A pause asked for with the last piece comes too late: the generation ends.
		if err := g.emit(out); err != nil && !errors.Is(err, llm.ErrPause) {
			g.res.StopReason = llm.StopCancelled
			return llm.CancelledError(g.ctx, err)
		}
	}
	return nil
}

// keep decodes the last sampled token into the cache when the generation ended
// normally: the next prompt, which continues the dialogue, most likely contains it. It
// costs one token's time after the text is complete.
func (g *generation) keep(tok llama.Token) {
	e := g.e
	if e.cfg.NoPrefixCache || len(e.cache)+1 >= e.lctx.NCtx() || g.ctx.Err() != nil {
		return
	}
	if err := e.lctx.DecodeTokens(g.ctx, 0, len(e.cache), []llama.Token{tok}); err != nil {
		e.resync(append(e.cache, tok))
		return
	}
	e.cache = append(e.cache, tok)
}

func (g *generation) decodeFailed(what string, err error) error {
	if errors.Is(err, llama.ErrAborted) && g.ctx.Err() != nil {
		g.res.StopReason = llm.StopCancelled
		return llm.CancelledError(g.ctx, nil)
	}
	return fmt.Errorf("llm: %s: %w", what, err)
}

// resync makes the cache bookkeeping match the memory after a failed or aborted decode
// of tokens (positions 0..len-1): a decode can leave part of its batch in memory.
func (e *Engine) resync(tokens []llama.Token) {
	e.logitsAt = -1
	keep := min(max(e.lctx.SeqPosMax(0)+1, 0), len(tokens))
	if err := e.lctx.SeqRemove(0, keep, -1); err != nil {
		e.lctx.Clear()
		keep = 0
	}
	e.cache = append(e.cache[:0], tokens[:keep]...)
}

func commonPrefix(a, b []llama.Token) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func samplerParams(s llm.Sampling, vocab int) llama.SamplerParams {
	return llama.SamplerParams{
		Temperature:   s.Temperature,
		TopK:          s.TopK,
		TopP:          s.TopP,
		MinP:          s.MinP,
		RepeatPenalty: s.RepeatPenalty,
		RepeatLastN:   s.RepeatLastN,
		VocabSize:     vocab,
		Seed:          s.Seed,
	}
}
