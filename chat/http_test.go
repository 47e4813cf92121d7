package chat

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/modules/llm/llmtest"
	"github.com/parley-voice/parley/pipeline"
)

// TestChatOverServerFitsItsContext: a conversation longer than the server's context goes
// on, because the prompt keeps to the context llama-server reported; every line gets its
// reply and none fails.
func TestChatOverServerFitsItsContext(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	f := newChatFixture(t)
	var input strings.Builder
	const lines = 30
	for i := range lines {
		fmt.Fprintf(&input, "Tell me the story of the little dog number %d and its big red ball.\n", i+1)
	}
	_, errOut, err := f.chat(context.Background(), t, input.String(), chatOptions{session: "long", cfg: func(c *pipeline.Config) {
		c.LLM.Engine, c.LLM.URL = "http", srv.URL
	}})
	if err != nil || strings.Contains(errOut, "failed") {
		t.Fatalf("chat over llama-server: %v\n%s", err, errOut)
	}
	utts := f.session(t, "long")
	replies := 0
	for _, u := range utts {
		if u.Speaker == dialogue.Agent && u.Text != "" {
			replies++
		}
	}
	if replies != lines {
		t.Errorf("%d replies to %d lines", replies, lines)
	}
}

// TestLLMTimeoutFromConfig: llm.timeout is how long the http engine waits for a server
// that does not answer; the chat reports the failure and goes on.
func TestLLMTimeoutFromConfig(t *testing.T) {
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		http.NotFound(w, r)
	}))
	defer silent.Close()
	defer close(release)
	cfg, err := pipeline.Parse([]byte("llm: {engine: http, url: "+silent.URL+", timeout: 300ms}\n"), t.TempDir(), demoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Timeout.Milliseconds() != 300 {
		t.Fatalf("llm.timeout parsed as %v", cfg.LLM.Timeout)
	}
	if _, err := pipeline.Parse([]byte("llm: {timeout: -1s}\n"), t.TempDir(), demoConfig(t)); err == nil {
		t.Error("a negative llm.timeout was accepted")
	}
	f := newChatFixture(t)
	_, errOut, err := f.chat(context.Background(), t, "Hello\n", chatOptions{cfg: func(c *pipeline.Config) { *c = cfg; c.Session.Dir = "" }})
	if err != nil || !strings.Contains(errOut, "server sent nothing within the timeout (300ms)") || strings.Contains(errOut, "unreachable") {
		t.Errorf("chat with a silent server: %v\n%s", err, errOut)
	}
}
