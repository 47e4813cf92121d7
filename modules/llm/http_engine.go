package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parley-voice/parley/internal/ellipsis"
)

// HTTP modes.
const (
	ModeCompletions = "completions" // POST /v1/completions with the prompt text
	ModeChat        = "chat"        // POST /v1/chat/completions with messages
)

// HTTPConfig configures an engine for an OpenAI-compatible server: llama-server,
// ollama, vLLM or a hosted API.
type HTTPConfig struct {
	// URL is the server: its root ("http://127.0.0.1:8080"), its API base ending in /v1
	// ("https://api.openai.com/v1"), or a full .../completions or .../chat/completions URL.
	URL string
	// Model is the model name sent with each request (llama-server ignores it).
	Model string
	// APIKeyEnv names the environment variable that holds the API key (default
	// OPENAI_API_KEY). The key is read once, sent as a bearer token and never logged or
	// put into errors. An unset variable means no key.
	APIKeyEnv string
	// Mode is ModeCompletions (default) or ModeChat.
	Mode string
	// Timeout is how long to wait for the response to start and, while streaming, for
	// the next chunk (default 60 s). A slow prompt evaluation counts against it.
	Timeout time.Duration
	// ConnectTimeout bounds establishing a connection (default 5 s).
	ConnectTimeout time.Duration
	// ConnectRetries is how often a request that could not reach the server (or found it
	// still loading its model, 503) is tried again, with doubling delays from RetryDelay
	// (0: 2 retries; negative: none).
	ConnectRetries int
	// RetryDelay is the first retry's delay (default 250 ms).
	RetryDelay time.Duration
	// SendStopToServer also sends the stop strings to the server (at most four, the
	// OpenAI limit). They are always applied here as well. Off by default, because
	// servers differ in whether the stop string is included in the stream.
	SendStopToServer bool
	// Client replaces the default HTTP client (its Timeout should be zero: a streamed
	// generation has no fixed length).
	Client *http.Client
}

// HTTPError is a non-success answer from the server.
type HTTPError struct {
	URL        string
	StatusCode int
	Message    string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("llm: %s answered %d %s: %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Errors of the HTTP engine.
var (
	// ErrStreamBroken means the stream ended before the server said it was finished:
	// the server died or the connection was lost mid-generation.
	ErrStreamBroken = errors.New("llm: the server's stream ended before the generation finished")
	// ErrUnreachable means there is no server to talk to: the connection was refused,
	// the host name does not resolve, or no route leads to it.
	ErrUnreachable = errors.New("llm: server unreachable")
	// ErrNoAnswer means a connection was attempted or made but the server did not
	// complete it in time (a connect or TLS handshake timeout).
	ErrNoAnswer = errors.New("llm: no answer from the server")
	// ErrIdleTimeout means the server sent nothing for HTTPConfig.Timeout.
	ErrIdleTimeout = errors.New("llm: server sent nothing within the timeout")
)

// HTTPEngine streams completions from an OpenAI-compatible server.
type HTTPEngine struct {
	cfg      HTTPConfig
	endpoint string // the completions or chat completions URL
	root     string // the server root, for /tokenize
	apiKey   string
	client   *http.Client
	turn     chan struct{} // one generation at a time, like the in-process engine
	// noTokenize is set once the server answered that it has no /tokenize endpoint:
	// token counts are estimated from then on.
	noTokenize atomic.Bool
	// noPrefill is set once the server showed it gives no token probabilities (see
	// Prefill); fewerLogprobs once it refused prefillLogprobs of them.
	noPrefill     atomic.Bool
	fewerLogprobs atomic.Bool
}

// NewHTTPEngine checks cfg and returns an engine. It does not contact the server.
func NewHTTPEngine(cfg HTTPConfig) (*HTTPEngine, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeCompletions
	}
	if cfg.Mode != ModeCompletions && cfg.Mode != ModeChat {
		return nil, fmt.Errorf("llm: http engine: mode %q (want %q or %q)", cfg.Mode, ModeCompletions, ModeChat)
	}
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = "OPENAI_API_KEY"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	switch {
	case cfg.ConnectRetries == 0:
		cfg.ConnectRetries = 2
	case cfg.ConnectRetries < 0:
		cfg.ConnectRetries = 0
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 250 * time.Millisecond
	}
	endpoint, root, err := endpoints(cfg.URL, cfg.Mode)
	if err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
		client = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         dialer.DialContext,
			TLSHandshakeTimeout: cfg.ConnectTimeout,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return &HTTPEngine{
		cfg:      cfg,
		endpoint: endpoint,
		root:     root,
		apiKey:   os.Getenv(cfg.APIKeyEnv),
		client:   client,
		turn:     make(chan struct{}, 1),
	}, nil
}

// endpoints derives the generation URL and the server root from the configured URL.
func endpoints(raw, mode string) (endpoint, root string, err error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("llm: http engine: URL %q is not an http(s) URL with a host", raw)
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	p := strings.TrimRight(u.Path, "/")
	route := "/completions"
	if mode == ModeChat {
		route = "/chat/completions"
	}
	var base string
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		base = strings.TrimSuffix(p, "/chat/completions")
	case strings.HasSuffix(p, "/completions"):
		base = strings.TrimSuffix(p, "/completions")
	case strings.HasSuffix(p, "/v1"):
		base = p
	default:
		base = p + "/v1"
	}
	u.Path = base + route
	endpoint = u.String()
	u.Path = strings.TrimSuffix(base, "/v1")
	root = strings.TrimRight(u.String(), "/")
	return endpoint, root, nil
}

// String describes the engine without its API key, so that printing or logging it
// (even with %+v) cannot leak the key.
func (e *HTTPEngine) String() string { return "llm.HTTPEngine(" + e.cfg.Mode + " " + e.endpoint + ")" }

// GoString is String for %#v.
func (e *HTTPEngine) GoString() string { return e.String() }

// Endpoint returns the URL the engine posts generations to.
func (e *HTTPEngine) Endpoint() string { return e.endpoint }

// Close releases idle connections.
func (e *HTTPEngine) Close() error {
	e.client.CloseIdleConnections()
	return nil
}

// request bodies of the OpenAI API, with llama-server's and vLLM's extensions sent only
// when set (hosted APIs reject unknown fields).
type completionRequest struct {
	Model         string         `json:"model,omitempty"`
	Prompt        string         `json:"prompt,omitempty"`
	Messages      []ChatMessage  `json:"messages,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	Temperature   float32        `json:"temperature"`
	TopP          float32        `json:"top_p,omitempty"`
	TopK          int            `json:"top_k,omitempty"`
	MinP          float32        `json:"min_p,omitempty"`
	RepeatPenalty float32        `json:"repeat_penalty,omitempty"`
	RepetitionPen float32        `json:"repetition_penalty,omitempty"`
	RepeatLastN   int            `json:"repeat_last_n,omitempty"`
	Seed          *uint32        `json:"seed,omitempty"`
	Stop          []string       `json:"stop,omitempty"`
	// Logprobs asks for the log-probabilities of that many most likely tokens (prefills).
	Logprobs int `json:"logprobs,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// streamChunk is one streamed chunk of either endpoint.
type streamChunk struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Content *string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage   *usage          `json:"usage"`
	Timings *serverTimings  `json:"timings"`
	Error   json.RawMessage `json:"error"`
}

// usage is an answer's token counts (streamed in its last chunk, or in the answer).
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// cached returns how many prompt tokens the server had cached, as far as it says.
func (u usage) cached() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// serverTimings is llama-server's account of an answer.
type serverTimings struct {
	CacheN             int     `json:"cache_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
}

func (e *HTTPEngine) body(req Request) ([]byte, error) {
	s := req.Sampling
	body := completionRequest{
		Model:         e.cfg.Model,
		MaxTokens:     req.MaxTokens,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
		Temperature:   max(s.Temperature, 0),
		TopK:          s.TopK,
		MinP:          s.MinP,
	}
	if s.TopP > 0 && s.TopP < 1 {
		body.TopP = s.TopP
	}
	if s.RepeatPenalty > 0 && s.RepeatPenalty != 1 {
		body.RepeatPenalty, body.RepetitionPen, body.RepeatLastN = s.RepeatPenalty, s.RepeatPenalty, s.RepeatLastN
	}
	if !s.Greedy() {
		seed := s.Seed
		body.Seed = &seed
	}
	if e.cfg.SendStopToServer {
		for _, st := range req.Stop {
			if st != "" && len(body.Stop) < 4 {
				body.Stop = append(body.Stop, st)
			}
		}
	}
	if e.cfg.Mode == ModeChat {
		body.Messages = req.Messages
		if len(body.Messages) == 0 {
			body.Messages = []ChatMessage{{Role: RoleUser, Content: req.Prompt}}
		}
	} else {
		if req.Prompt == "" {
			return nil, errors.New("llm: empty prompt")
		}
		body.Prompt = req.Prompt
	}
	return json.Marshal(body)
}

// Generate implements Engine.
func (e *HTTPEngine) Generate(ctx context.Context, req Request, emit func(string) error) (res Result, err error) {
	start := time.Now()
	res.StopReason = StopError
	defer func() { res.Duration = time.Since(start) }()
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		res.StopReason = StopCancelled
		return res, CancelledError(ctx, nil)
	}
	defer func() { <-e.turn }()

	body, err := e.body(req)
	if err != nil {
		return res, err
	}
	// The idle timer cancels the request when the server goes quiet; every line that
	// arrives pushes it back.
	reqCtx, cancelReq := context.WithCancelCause(ctx)
	defer cancelReq(nil)
	idle := time.AfterFunc(e.cfg.Timeout, func() { cancelReq(ErrIdleTimeout) })
	defer idle.Stop()

	resp, err := e.post(reqCtx, body)
	if err != nil {
		if ctx.Err() != nil {
			res.StopReason = StopCancelled
			return res, CancelledError(ctx, nil)
		}
		if errors.Is(context.Cause(reqCtx), ErrIdleTimeout) {
			return res, fmt.Errorf("%w (%v) waiting for %s to answer", ErrIdleTimeout, e.cfg.Timeout, e.endpoint)
		}
		return res, err
	}
	defer resp.Body.Close()

	text := NewTextStream(req.Stop)
	defer func() { res.Text = text.Text() }()
	var (
		chunks   int
		finished bool
		usage    bool
		tps      float64
		first    time.Time
	)
	sse := newSSEReader(resp.Body, 1<<20)
	for {
		ev, err := sse.Next()
		idle.Reset(e.cfg.Timeout)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				res.StopReason = StopCancelled
				return res, CancelledError(ctx, nil)
			case errors.Is(context.Cause(reqCtx), ErrIdleTimeout):
				return res, fmt.Errorf("%w (%v) while streaming from %s after %d chunks", ErrIdleTimeout, e.cfg.Timeout, e.endpoint, chunks)
			case errors.Is(err, io.EOF) && finished:
				// A server that ends the stream after its final chunk without [DONE].
				return e.finish(ctx, &res, text, emit, chunks, usage, tps, first)
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				return res, fmt.Errorf("%w: %s closed the stream after %d chunks", ErrStreamBroken, e.endpoint, chunks)
			default:
				return res, fmt.Errorf("%w: reading from %s after %d chunks: %w", ErrStreamBroken, e.endpoint, chunks, err)
			}
		}
		if ev.Event == "error" {
			return res, fmt.Errorf("llm: %s reported an error mid-stream: %s", e.endpoint, e.redact(ev.Data))
		}
		data := strings.TrimSpace(ev.Data)
		if data == "[DONE]" {
			return e.finish(ctx, &res, text, emit, chunks, usage, tps, first)
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return res, fmt.Errorf("llm: malformed chunk from %s: %w (data %q)", e.endpoint, err, e.redact(ellipsis.Cut(data, 200)))
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return res, fmt.Errorf("llm: %s reported an error mid-stream: %s", e.endpoint, e.redact(errorMessage(c.Error)))
		}
		if c.Usage != nil {
			usage = true
			res.PromptTokens = c.Usage.PromptTokens
			res.Tokens = c.Usage.CompletionTokens
			res.CachedTokens = c.Usage.cached()
		}
		if c.Timings != nil {
			res.CachedTokens = max(res.CachedTokens, c.Timings.CacheN)
			res.PromptEval = time.Duration(c.Timings.PromptMS * float64(time.Millisecond))
			tps = c.Timings.PredictedPerSecond
		}
		for _, ch := range c.Choices {
			piece := ch.Text
			if ch.Delta.Content != nil {
				piece += *ch.Delta.Content
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finished = true
				switch *ch.FinishReason {
				case "length":
					res.StopReason = StopLength
				default:
					res.StopReason = StopEOG
				}
			}
			if piece == "" {
				continue
			}
			chunks++
			if first.IsZero() {
				first = time.Now()
				res.TimeToFirstToken = first.Sub(start)
			}
			out, stopped := text.Push(piece)
			if out != "" {
				if ctx.Err() != nil {
					res.StopReason = StopCancelled
					return res, CancelledError(ctx, nil)
				}
				if err := emit(out); err != nil {
					res.StopReason = StopCancelled
					return res, CancelledError(ctx, err)
				}
			}
			if stopped {
				res.StopReason = StopString
				if !usage {
					res.Tokens = chunks
				}
				res.TokensPerSecond = streamRate(chunks, first)
				return res, nil
			}
		}
	}
}

// finish completes a generation whose stream ended properly.
func (e *HTTPEngine) finish(ctx context.Context, res *Result, text *TextStream, emit func(string) error, chunks int, usage bool, tps float64, first time.Time) (Result, error) {
	if out := text.Flush(); out != "" {
		if ctx.Err() != nil {
			res.StopReason = StopCancelled
			return *res, CancelledError(ctx, nil)
		}
		if err := emit(out); err != nil {
			res.StopReason = StopCancelled
			return *res, CancelledError(ctx, err)
		}
	}
	if !usage {
		res.Tokens = chunks
	}
	if res.StopReason == StopError {
		res.StopReason = StopEOG
	}
	res.TokensPerSecond = tps
	if tps == 0 {
		res.TokensPerSecond = streamRate(res.Tokens, first)
	}
	return *res, nil
}

func streamRate(tokens int, first time.Time) float64 {
	if first.IsZero() || tokens < 2 {
		return 0
	}
	return TokensPerSecond(tokens-1, time.Since(first))
}

// post sends the request, retrying while the server cannot be reached or is loading.
func (e *HTTPEngine) post(ctx context.Context, body []byte) (*http.Response, error) {
	delay := e.cfg.RetryDelay
	var lastErr error
	for attempt := 0; ; attempt++ {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("llm: %w", err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream")
		if e.apiKey != "" {
			hreq.Header.Set("Authorization", "Bearer "+e.apiKey)
		}
		resp, err := e.client.Do(hreq)
		retry := false
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = e.transportError(e.endpoint, err)
			retry = true
		case resp.StatusCode != http.StatusOK:
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
			resp.Body.Close()
			lastErr = &HTTPError{URL: e.endpoint, StatusCode: resp.StatusCode, Message: e.redact(errorMessage(msg))}
			retry = resp.StatusCode == http.StatusServiceUnavailable
		default:
			return resp, nil
		}
		if !retry || attempt >= e.cfg.ConnectRetries {
			if retry && attempt > 0 {
				return nil, fmt.Errorf("%w (after %d attempts)", lastErr, attempt+1)
			}
			return nil, lastErr
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		delay *= 2
	}
}

// transportError says why a request to url got no HTTP answer. Only a server that is not
// there (connection refused, a name that does not resolve, no route to the host) is
// "unreachable"; a server that takes too long is not, and neither is a broken
// connection or a TLS failure.
func (e *HTTPEngine) transportError(url string, err error) error {
	err = e.redactErr(err)
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENOENT):
		// ENOENT: a unix socket that is not there.
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, url, err)
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("%w within %v: %s: %w", ErrNoAnswer, e.cfg.ConnectTimeout, url, err)
	}
	return fmt.Errorf("llm: request to %s failed: %w", url, err)
}

// errorMessage extracts the message of an OpenAI-style error body
// ({"error":{"message":...}} or {"error":"..."}), or returns the body itself.
func errorMessage(body []byte) string {
	var withObject struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &withObject) == nil && withObject.Error.Message != "" {
		return withObject.Error.Message
	}
	var withString struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &withString) == nil && withString.Error != "" {
		return withString.Error
	}
	var object struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &object) == nil && object.Message != "" {
		return object.Message
	}
	return ellipsis.Cut(strings.TrimSpace(string(body)), 300)
}

// redact removes the API key from text that came from outside (an echoing server).
func (e *HTTPEngine) redact(s string) string {
	if e.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, e.apiKey, "[redacted]")
}

func (e *HTTPEngine) redactErr(err error) error {
	if e.apiKey == "" || !strings.Contains(err.Error(), e.apiKey) {
		return err
	}
	return errors.New(e.redact(err.Error()))
}

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
