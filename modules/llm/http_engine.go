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
