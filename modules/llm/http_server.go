package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Tokenizer counts tokens through the server's /tokenize endpoint (llama-server and
// vLLM have one). A server without one (the OpenAI API, ollama) answers 404; then the
// count is estimated from the text's length, generously (a token per two bytes, where
// English averages about four with the vocabularies of real models), so that a prompt
// fitted to the context with it fits: such a prompt keeps fewer turns than it could.
func (e *HTTPEngine) Tokenizer() Tokenizer { return httpTokenizer{e} }

// estimateTokens over-estimates the tokens of text (with the special tokens a prompt
// starts with) for servers that cannot count them.
func estimateTokens(text string) int { return (len(text)+1)/2 + 2 }

type httpTokenizer struct{ e *HTTPEngine }

// CountTokens implements Tokenizer, counting the way a prompt is tokenized (with BOS).
func (t httpTokenizer) CountTokens(text string) (int, error) {
	e := t.e
	if e.noTokenize.Load() {
		return estimateTokens(text), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"content": text, "prompt": text, "add_special": true, "model": e.cfg.Model})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.root+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("llm: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, e.transportError(e.root+"/tokenize", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, fmt.Errorf("llm: reading %s/tokenize: %w", e.root, err)
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		e.noTokenize.Store(true)
		return estimateTokens(text), nil
	}
	if resp.StatusCode != http.StatusOK {
		return 0, &HTTPError{URL: e.root + "/tokenize", StatusCode: resp.StatusCode, Message: e.redact(errorMessage(data))}
	}
	var out struct {
		Tokens []json.RawMessage `json:"tokens"`
		Count  *int              `json:"count"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, fmt.Errorf("llm: malformed answer from %s/tokenize: %w", e.root, err)
	}
	if out.Count != nil {
		return *out.Count, nil
	}
	return len(out.Tokens), nil
}

// ContextSize asks the server how many tokens one request may hold, prompt and reply
// together: llama-server reports its slots' context in GET /props
// (default_generation_settings.n_ctx) and, unless started with --no-slots, per slot in
// GET /slots. It returns 0 without an error when the server does not say (OpenAI's API
// and most hosted ones have no such endpoint): the caller keeps its own setting then.
// An error means the server could not be asked (unreachable, no answer).
func (e *HTTPEngine) ContextSize(ctx context.Context) (int, error) {
	var props struct {
		DefaultGenerationSettings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	found, err := e.getJSON(ctx, "/props", &props)
	if err != nil {
		return 0, err
	}
	if found && props.DefaultGenerationSettings.NCtx > 0 {
		return props.DefaultGenerationSettings.NCtx, nil
	}
	var slots []struct {
		NCtx int `json:"n_ctx"`
	}
	if found, err = e.getJSON(ctx, "/slots", &slots); err != nil || !found {
		return 0, err
	}
	// Every slot has the same context; the smallest is the safe one all the same.
	n := 0
	for _, s := range slots {
		if s.NCtx > 0 && (n == 0 || s.NCtx < n) {
			n = s.NCtx
		}
	}
	return n, nil
}

// getJSON reads GET root+path into out. found is false when the server has no such
// endpoint or its answer is not the JSON expected (a different kind of server).
func (e *HTTPEngine) getJSON(ctx context.Context, path string, out any) (found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.root+path, nil)
	if err != nil {
		return false, fmt.Errorf("llm: %w", err)
	}
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("%w within %v: %s%s", ErrNoAnswer, e.cfg.Timeout, e.root, path)
		}
		return false, e.transportError(e.root+path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return false, fmt.Errorf("llm: reading %s%s: %w", e.root, path, err)
	}
	return json.Unmarshal(data, out) == nil, nil
}
