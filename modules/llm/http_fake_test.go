package llm_test

// Tests of the HTTP engine against scripted servers, for what a real llama-server does
// not do on demand: malformed streams, error events, authentication, silence. The real
// server is tested in http_engine_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// scripted serves each request with the handler's stream.
func scripted(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// sseChunks writes a completions stream of the given texts.
func sseChunks(w http.ResponseWriter, texts []string, finish string, done bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, s := range texts {
		b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"text": s, "index": 0, "finish_reason": nil}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	if finish != "" {
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":%q}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d}}\n\n", finish, len(texts))
	}
	if done {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func TestHTTPEngineStreams(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		mode     string
		want     string
		stop     string
		tokens   int
		wantErr  error
		errMatch string
	}{
		{name: "completions", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"Hello", ",", " world"}, "length", true)
		}, want: "Hello, world", stop: llm.StopLength, tokens: 3},
		{name: "finish without DONE", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"a", "b"}, "stop", false)
		}, want: "ab", stop: llm.StopEOG, tokens: 2},
		{name: "chat deltas", mode: llm.ModeChat, handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/chat/completions" {
				http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
				return
			}
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n")
			fmt.Fprint(w, ": keep-alive\n\n")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n")
			fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		}, want: "Hi there", stop: llm.StopEOG, tokens: 2},
		{name: "split UTF-8 and stop across chunks", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"caf", "é.\nUs", "er: no"}, "length", true)
		}, want: "café.", stop: llm.StopString, tokens: 3},
		{name: "malformed JSON", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"ok"}, "", false)
			fmt.Fprint(w, "data: {\"choices\": [\n\n")
		}, want: "ok", errMatch: "malformed chunk"},
		{name: "error object mid-stream", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"ok"}, "", false)
			fmt.Fprint(w, "data: {\"error\":{\"code\":500,\"message\":\"the model exploded\"}}\n\n")
		}, want: "ok", errMatch: "the model exploded"},
		{name: "error event", handler: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "event: error\ndata: {\"message\":\"overloaded\"}\n\n")
		}, errMatch: "overloaded"},
		{name: "stream cut without finish", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"par", "tial"}, "", false)
		}, want: "partial", wantErr: llm.ErrStreamBroken},
		{name: "event cut in the middle", handler: func(w http.ResponseWriter, r *http.Request) {
			sseChunks(w, []string{"x"}, "", false)
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"y\"")
		}, want: "x", wantErr: llm.ErrStreamBroken},
		{name: "HTTP error with OpenAI body", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":400,"message":"request (1202 tokens) exceeds the available context size (512 tokens)","type":"exceed_context_size_error"}}`)
		}, errMatch: "400 Bad Request: request (1202 tokens) exceeds"},
		{name: "HTTP error with plain body", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no such model", http.StatusNotFound)
		}, errMatch: "404 Not Found: no such model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := scripted(t, tc.handler)
			e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, Mode: tc.mode, ConnectRetries: -1})
			var sb strings.Builder
			res, err := e.Generate(context.Background(), llm.Request{Prompt: "p", Stop: []string{"\nUser:"}}, func(s string) error {
				sb.WriteString(s)
				return nil
			})
			if sb.String() != tc.want || res.Text != tc.want {
				t.Errorf("emitted %q, Result.Text %q, want %q", sb.String(), res.Text, tc.want)
			}
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.errMatch != "":
				if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
					t.Errorf("err = %v, want one mentioning %q", err, tc.errMatch)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if res.StopReason != tc.stop || res.Tokens != tc.tokens {
					t.Errorf("stop %q tokens %d, want %q %d", res.StopReason, res.Tokens, tc.stop, tc.tokens)
				}
			}
			if err != nil && res.StopReason != llm.StopError {
				t.Errorf("failed generation has StopReason %q", res.StopReason)
			}
		})
	}
}

func TestHTTPEngineAPIKeyNeverInErrors(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	t.Setenv("PARLEY_TEST_API_KEY", key)
	var sawAuth atomic.Value
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sawAuth.Store(r.Header.Get("Authorization"))
		// A careless server that echoes the credentials.
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"invalid key %s"}}`, key)
	})
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, APIKeyEnv: "PARLEY_TEST_API_KEY"})
	_, err := e.Generate(context.Background(), llm.Request{Prompt: "p"}, func(string) error { return nil })
	var he *llm.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
		t.Fatalf("err = %v, want an HTTPError 401", err)
	}
	if got := sawAuth.Load(); got != "Bearer "+key {
		t.Errorf("Authorization header %q", got)
	}
	if strings.Contains(err.Error(), key) || strings.Contains(fmt.Sprintf("%+v %#v", e, e), key) {
		t.Errorf("the API key leaked: %v", err)
	}
	_, err = e.Tokenizer().CountTokens("x")
	if err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("tokenizer error %v", err)
	}

	// Without the variable no Authorization header is sent.
	t.Setenv("PARLEY_TEST_API_KEY", "")
	e2 := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, APIKeyEnv: "PARLEY_TEST_API_KEY"})
	e2.Generate(context.Background(), llm.Request{Prompt: "p"}, func(string) error { return nil })
	if got := sawAuth.Load(); got != "" {
		t.Errorf("Authorization header %q without a key", got)
	}
}

func TestHTTPEngineRequestBody(t *testing.T) {
	var body atomic.Value
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body.Store(string(b))
		sseChunks(w, []string{"x"}, "length", true)
	})
	decode := func() map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(body.Load().(string)), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, Model: "m1"})
	llmtest.Collect(t, e, llm.Request{Prompt: "hello", MaxTokens: 7, Stop: []string{"a", "b"}})
	m := decode()
	if m["prompt"] != "hello" || m["model"] != "m1" || m["max_tokens"] != 7.0 || m["stream"] != true || m["temperature"] != 0.0 {
		t.Errorf("greedy body %v", m)
	}
	for _, k := range []string{"seed", "top_k", "top_p", "min_p", "repeat_penalty", "stop", "messages"} {
		if _, ok := m[k]; ok {
			t.Errorf("greedy body has %q: %v", k, m)
		}
	}

	e = llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, Mode: llm.ModeChat, SendStopToServer: true})
	llmtest.Collect(t, e, llm.Request{Prompt: "hi", Stop: []string{"1", "2", "3", "4", "5"},
		Sampling: llm.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.1, Seed: 3}})
	m = decode()
	msgs, _ := m["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "user" || msgs[0].(map[string]any)["content"] != "hi" {
		t.Errorf("chat messages %v", m["messages"])
	}
	if m["temperature"] != 0.7 && fmt.Sprint(m["temperature"]) != "0.699999988079071" || m["top_k"] != 40.0 || m["seed"] != 3.0 || m["repeat_penalty"] == nil {
		t.Errorf("sampling body %v", m)
	}
	if stops, _ := m["stop"].([]any); len(stops) != 4 {
		t.Errorf("stop %v, want the first four", m["stop"])
	}
	if _, ok := m["prompt"]; ok {
		t.Errorf("chat body has a prompt: %v", m)
	}
}

func TestHTTPEngineRetries(t *testing.T) {
	var calls atomic.Int32
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":503,"message":"Loading model"}}`)
			return
		}
		sseChunks(w, []string{"ready"}, "length", true)
	})
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, RetryDelay: 5 * time.Millisecond})
	if _, res := llmtest.Collect(t, e, llm.Request{Prompt: "p"}); res.Text != "ready" || calls.Load() != 3 {
		t.Errorf("after two 503s: %q in %d calls", res.Text, calls.Load())
	}

	calls.Store(0)
	e = llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, ConnectRetries: 1, RetryDelay: 5 * time.Millisecond})
	_, err := e.Generate(context.Background(), llm.Request{Prompt: "p"}, func(string) error { return nil })
	var he *llm.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 503 || !strings.Contains(err.Error(), "Loading model") || calls.Load() != 2 {
		t.Errorf("one retry: err %v after %d calls", err, calls.Load())
	}

	// Nothing listens: the error says so after the retries.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	e = llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: closed.URL, ConnectRetries: 2, RetryDelay: time.Millisecond})
	_, err = e.Generate(context.Background(), llm.Request{Prompt: "p"}, func(string) error { return nil })
	if !errors.Is(err, llm.ErrUnreachable) || !strings.Contains(err.Error(), "after 3 attempts") || !strings.Contains(err.Error(), closed.URL) {
		t.Errorf("unreachable: %v", err)
	}

	// Cancelling during the retry wait returns promptly.
	e = llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: closed.URL, ConnectRetries: 5, RetryDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := e.Generate(ctx, llm.Request{Prompt: "p"}, func(string) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) || res.StopReason != llm.StopCancelled {
		t.Errorf("cancelled retry: %v, %q", err, res.StopReason)
	}
}

func TestHTTPEngineIdleTimeout(t *testing.T) {
	// The handlers read the request body so that the server notices when the client
	// hangs up, and give up on their own in case it does not.
	silence := func(r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseChunks(w, []string{"first"}, "", false)
		silence(r)
	})
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, Timeout: 100 * time.Millisecond})
	start := time.Now()
	res, err := e.Generate(context.Background(), llm.Request{Prompt: "p"}, func(string) error { return nil })
	if !errors.Is(err, llm.ErrIdleTimeout) || res.Text != "first" {
		t.Errorf("silent server: %v, text %q", err, res.Text)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v", d)
	}

	slow := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		silence(r) // never answers
	})
	e = llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: slow.URL, Timeout: 100 * time.Millisecond, ConnectRetries: -1})
	if _, err := e.Generate(context.Background(), llm.Request{Prompt: "p"}, func(string) error { return nil }); !errors.Is(err, llm.ErrIdleTimeout) {
		t.Errorf("no answer: %v", err)
	}
}
