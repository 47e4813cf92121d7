package llm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// The HTTP engine against a real llama-server.

func TestHTTPEngineChat(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL + "/v1", Mode: llm.ModeChat})
	// stories260K has no chat template; llama-server falls back to its default and the
	// tiny model answers with a story fragment, which is all this checks.
	pieces, res := llmtest.Collect(t, e, llm.Request{Messages: []llm.ChatMessage{
		{Role: llm.RoleSystem, Content: "You tell stories."},
		{Role: llm.RoleUser, Content: "Tell me about a cat."},
	}, MaxTokens: 16})
	if res.Text == "" || len(pieces) < 2 || res.Tokens != 16 || res.StopReason != llm.StopLength {
		t.Errorf("chat: %d pieces, text %q, %d tokens, stop %q", len(pieces), res.Text, res.Tokens, res.StopReason)
	}
	// A prompt without messages becomes one user message.
	if _, res := llmtest.Collect(t, e, llm.Request{Prompt: "Hello", MaxTokens: 4}); res.Tokens != 4 {
		t.Errorf("prompt as a chat message: %d tokens", res.Tokens)
	}
}

func TestHTTPEngineStopAndCancel(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL})
	req := llm.Request{Prompt: "Once upon a time", MaxTokens: 60}
	_, full := llmtest.Collect(t, e, req)
	i := strings.Index(full.Text, "Lily")
	if i < 0 {
		t.Fatalf("test assumes the story mentions Lily: %q", full.Text)
	}

	for _, serverSide := range []bool{false, true} {
		se := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, SendStopToServer: serverSide})
		stopReq := req
		stopReq.Stop = []string{"Lily"}
		_, res := llmtest.Collect(t, se, stopReq)
		// With the stop sent to the server, the server stops there and says "stop"; the
		// engine reports eog because it cannot tell the two apart.
		if res.Text != full.Text[:i] || (res.StopReason != llm.StopString && !(serverSide && res.StopReason == llm.StopEOG)) {
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
	if !errors.Is(err, context.Canceled) || res.StopReason != llm.StopCancelled || after != 0 || len(pieces) != 3 {
		t.Errorf("cancel: err %v, stop %q, %d pieces, %d after cancel", err, res.StopReason, len(pieces), after)
	}
	// The engine (and the server) carry on.
	if _, again := llmtest.Collect(t, e, req); again.Text != full.Text {
		t.Errorf("after cancel: %q, want %q", again.Text, full.Text)
	}
}

// TestHTTPEngineServerKilledMidStream kills llama-server while it streams: the engine
// reports a clear error with the partial text, reports the dead server clearly on the
// next call, and works again once a server is back on the port.
func TestHTTPEngineServerKilledMidStream(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, ConnectRetries: 1, RetryDelay: 50 * time.Millisecond})
	var pieces []string
	res, err := e.Generate(context.Background(), llm.Request{Prompt: "Once upon a time", MaxTokens: 400}, func(p string) error {
		pieces = append(pieces, p)
		if len(pieces) == 3 {
			srv.Kill()
		}
		return nil
	})
	if !errors.Is(err, llm.ErrStreamBroken) {
		t.Fatalf("server killed mid-stream: err = %v (%d pieces), want ErrStreamBroken", err, len(pieces))
	}
	if !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error %q does not name the server", err)
	}
	if res.Text != strings.Join(pieces, "") || len(pieces) < 3 || res.StopReason != llm.StopError {
		t.Errorf("partial result: %q (pieces %q), stop %q", res.Text, pieces, res.StopReason)
	}
	t.Logf("killed mid-stream: %v", err)

	_, err = e.Generate(context.Background(), llm.Request{Prompt: "Once upon a time", MaxTokens: 5}, func(string) error { return nil })
	if !errors.Is(err, llm.ErrUnreachable) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Errorf("dead server: err = %v, want ErrUnreachable after 2 attempts", err)
	}
	t.Logf("dead server: %v", err)

	llmtest.StartLlamaServer(t, srv.Port)
	if _, res := llmtest.Collect(t, e, llm.Request{Prompt: "Once upon a time", MaxTokens: 5}); res.Tokens != 5 {
		t.Errorf("after the restart: %d tokens", res.Tokens)
	}
}

func TestHTTPEngineConcurrentGenerate(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL})
	_, want := llmtest.Collect(t, e, llm.Request{Prompt: "Tom was sad", MaxTokens: 20})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sb strings.Builder
			res, err := e.Generate(context.Background(), llm.Request{Prompt: "Tom was sad", MaxTokens: 20}, func(s string) error {
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
