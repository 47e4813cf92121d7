package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/llama"
)

func newHTTPEngine(t testing.TB, cfg HTTPConfig) *HTTPEngine {
	t.Helper()
	e, err := NewHTTPEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestHTTPEngineMatchesInProcess: greedy completions streamed from a real llama-server
// equal the in-process engine's on the same model.
func TestHTTPEngineMatchesInProcess(t *testing.T) {
	srv := startLlamaServer(t, 0)
	e := newHTTPEngine(t, HTTPConfig{URL: srv.URL})
	local := newEngine(t, loadStories(t), LlamaConfig{})
	for _, req := range []Request{
		{Prompt: "Once upon a time", MaxTokens: 64},
		{Prompt: "The little dog", MaxTokens: 32},
		{Prompt: "Once upon a time", MaxTokens: 64}, // served from the server's prompt cache
	} {
		pieces, got := collect(t, e, req)
		_, want := collect(t, local, req)
		if got.Text != want.Text {
			t.Errorf("%q:\nserver:     %q\nin-process: %q", req.Prompt, got.Text, want.Text)
		}
		if got.Tokens != req.MaxTokens || got.StopReason != StopLength || got.PromptTokens != want.PromptTokens {
			t.Errorf("%q: tokens %d, stop %q, prompt tokens %d (want %d, length, %d)", req.Prompt, got.Tokens, got.StopReason, got.PromptTokens, req.MaxTokens, want.PromptTokens)
		}
		if len(pieces) < 2 {
			t.Errorf("%q: %d pieces; the answer was not streamed", req.Prompt, len(pieces))
		}
		if got.TimeToFirstToken <= 0 || got.TimeToFirstToken > got.Duration || got.TokensPerSecond <= 0 {
			t.Errorf("metrics: ttft %v, duration %v, %.0f tokens/s", got.TimeToFirstToken, got.Duration, got.TokensPerSecond)
		}
	}
}

func TestHTTPEngineChat(t *testing.T) {
	srv := startLlamaServer(t, 0)
	e := newHTTPEngine(t, HTTPConfig{URL: srv.URL + "/v1", Mode: ModeChat})
	// stories260K has no chat template; llama-server falls back to its default and the
	// tiny model answers with a story fragment, which is all this checks.
	pieces, res := collect(t, e, Request{Messages: []ChatMessage{
		{Role: RoleSystem, Content: "You tell stories."},
		{Role: RoleUser, Content: "Tell me about a cat."},
	}, MaxTokens: 16})
	if res.Text == "" || len(pieces) < 2 || res.Tokens != 16 || res.StopReason != StopLength {
		t.Errorf("chat: %d pieces, text %q, %d tokens, stop %q", len(pieces), res.Text, res.Tokens, res.StopReason)
	}
	// A prompt without messages becomes one user message.
	if _, res := collect(t, e, Request{Prompt: "Hello", MaxTokens: 4}); res.Tokens != 4 {
		t.Errorf("prompt as a chat message: %d tokens", res.Tokens)
	}
}

func TestHTTPEngineStopAndCancel(t *testing.T) {
	srv := startLlamaServer(t, 0)
	e := newHTTPEngine(t, HTTPConfig{URL: srv.URL})
	req := Request{Prompt: "Once upon a time", MaxTokens: 60}
	_, full := collect(t, e, req)
	i := strings.Index(full.Text, "Lily")
	if i < 0 {
		t.Fatalf("test assumes the story mentions Lily: %q", full.Text)
	}

	for _, serverSide := range []bool{false, true} {
		se := newHTTPEngine(t, HTTPConfig{URL: srv.URL, SendStopToServer: serverSide})
		stopReq := req
		stopReq.Stop = []string{"Lily"}
		_, res := collect(t, se, stopReq)
		// With the stop sent to the server, the server stops there and says "stop"; the
		// engine reports eog because it cannot tell the two apart.
		if res.Text != full.Text[:i] || (res.StopReason != StopString && !(serverSide && res.StopReason == StopEOG)) {
			t.Errorf("server-side %v: stop at Lily: %q (%s), want %q", serverSide, res.Text, res.StopReason, full.Text[:i])
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var pieces []string
	after := 0
	res, err := e.Generate(ctx, req, func(p string) error {
		if ctx.Err() != nil {
			after++
		}
		pieces = append(pieces, p)
		if len(pieces) == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || res.StopReason != StopCancelled || after != 0 || len(pieces) != 3 {
		t.Errorf("cancel: err %v, stop %q, %d pieces, %d after cancel", err, res.StopReason, len(pieces), after)
	}
	// The engine (and the server) carry on.
	if _, again := collect(t, e, req); again.Text != full.Text {
		t.Errorf("after cancel: %q, want %q", again.Text, full.Text)
	}
}

// TestHTTPEngineServerKilledMidStream kills llama-server while it streams: the engine
// reports a clear error with the partial text, reports the dead server clearly on the
// next call, and works again once a server is back on the port.
func TestHTTPEngineServerKilledMidStream(t *testing.T) {
	srv := startLlamaServer(t, 0)
	e := newHTTPEngine(t, HTTPConfig{URL: srv.URL, ConnectRetries: 1, RetryDelay: 50 * time.Millisecond})
	var pieces []string
	res, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 400}, func(p string) error {
		pieces = append(pieces, p)
		if len(pieces) == 3 {
			srv.Kill()
		}
		return nil
	})
	if !errors.Is(err, ErrStreamBroken) {
		t.Fatalf("server killed mid-stream: err = %v (%d pieces), want ErrStreamBroken", err, len(pieces))
	}
	if !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error %q does not name the server", err)
	}
	if res.Text != strings.Join(pieces, "") || len(pieces) < 3 || res.StopReason != StopError {
		t.Errorf("partial result: %q (pieces %q), stop %q", res.Text, pieces, res.StopReason)
	}
	t.Logf("killed mid-stream: %v", err)

	_, err = e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 5}, func(string) error { return nil })
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Errorf("dead server: err = %v, want ErrUnreachable after 2 attempts", err)
	}
	t.Logf("dead server: %v", err)

	startLlamaServer(t, srv.Port)
	if _, res := collect(t, e, Request{Prompt: "Once upon a time", MaxTokens: 5}); res.Tokens != 5 {
		t.Errorf("after the restart: %d tokens", res.Tokens)
	}
}

func TestHTTPEngineTokenizer(t *testing.T) {
	srv := startLlamaServer(t, 0)
	e := newHTTPEngine(t, HTTPConfig{URL: srv.URL + "/v1/"})
	m := loadStories(t)
	for _, text := range []string{"", "Once upon a time", "Mr. Smith paid 3.5 dollars.\nUser: hi"} {
		got, err := e.Tokenizer().CountTokens(text)
		want, _ := m.CountTokens(text)
		if err != nil || got != want {
			t.Errorf("CountTokens(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
}

func TestHTTPEngineConcurrentGenerate(t *testing.T) {
	srv := startLlamaServer(t, 0)
	e := newHTTPEngine(t, HTTPConfig{URL: srv.URL})
	_, want := collect(t, e, Request{Prompt: "Tom was sad", MaxTokens: 20})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sb strings.Builder
			res, err := e.Generate(context.Background(), Request{Prompt: "Tom was sad", MaxTokens: 20}, func(s string) error {
				sb.WriteString(s)
				return nil
			})
			if err != nil || res.Text != want.Text || sb.String() != want.Text {
				t.Errorf("concurrent: %q, %v", res.Text, err)
			}
		}()
	}
	wg.Wait()
}

// TestLlamaEngineTokensMatchLlamaServer compares token by token: llama-server's native
// /completion endpoint returns the ids of its greedy tokens, and the in-process engine
// must emit exactly their pieces, one piece per token.
func TestLlamaEngineTokensMatchLlamaServer(t *testing.T) {
	srv := startLlamaServer(t, 0)
	m := loadStories(t)
	e := newEngine(t, m, LlamaConfig{})
	for _, prompt := range []string{"Once upon a time", "Tom and Sue found a big red ball in the garden. They"} {
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 100, "temperature": 0, "return_tokens": true})
		resp, err := http.Post(srv.URL+"/completion", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Tokens  []llama.Token `json:"tokens"`
			Content string        `json:"content"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || len(out.Tokens) != 100 {
			t.Fatalf("llama-server answered %d tokens: %v", len(out.Tokens), err)
		}
		var want []string
		for _, tok := range out.Tokens {
			want = append(want, m.TokenToPiece(tok))
		}
		got, res := collect(t, e, Request{Prompt: prompt, MaxTokens: 100})
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || res.Text != out.Content {
			t.Errorf("%q:\nengine pieces %q\nserver tokens %q", prompt, got, want)
		}
	}
}
