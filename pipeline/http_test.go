package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// TestLoadEnginesLearnsServerContext: with the http engine the prompt is fitted to the
// context the server reports (llama-server -c 512), or to llm.context when that is
// smaller, or when the server does not say (an OpenAI-style API).
func TestLoadEnginesLearnsServerContext(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	openAI := httptest.NewServer(http.NotFoundHandler())
	defer openAI.Close()
	for _, tt := range []struct {
		url        string
		configured int
		want       int
	}{
		{srv.URL, 0, 512},
		{srv.URL + "/v1", 4096, 512},
		{srv.URL, 256, 256},
		{openAI.URL + "/v1", 1000, 1000},
		{openAI.URL + "/v1", 0, 0},
	} {
		cfg := demoConfig(t)
		cfg.LLM.Engine, cfg.LLM.URL, cfg.LLM.Context = "http", tt.url, tt.configured
		eng, err := LoadEngines(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if eng.Context != tt.want {
			t.Errorf("%s with llm.context %d: fitted to %d tokens, want %d", tt.url, tt.configured, eng.Context, tt.want)
		}
		eng.Close()
	}
}

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
	_, errOut, err := f.chat(context.Background(), t, input.String(), chatOptions{session: "long", cfg: func(c *Config) {
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
	cfg, err := Parse([]byte("llm: {engine: http, url: "+silent.URL+", timeout: 300ms}\n"), t.TempDir(), demoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Timeout.Milliseconds() != 300 {
		t.Fatalf("llm.timeout parsed as %v", cfg.LLM.Timeout)
	}
	if _, err := Parse([]byte("llm: {timeout: -1s}\n"), t.TempDir(), demoConfig(t)); err == nil {
		t.Error("a negative llm.timeout was accepted")
	}
	f := newChatFixture(t)
	_, errOut, err := f.chat(context.Background(), t, "Hello\n", chatOptions{cfg: func(c *Config) { *c = cfg; c.Session.Dir = "" }})
	if err != nil || !strings.Contains(errOut, "server sent nothing within the timeout (300ms)") || strings.Contains(errOut, "unreachable") {
		t.Errorf("chat with a silent server: %v\n%s", err, errOut)
	}
}

// TestPredictiveWithLlamaServer: with the http engine and a real llama-server, the
// predictive pipeline feeds the user's words to the server while they speak, and the
// end of the turn is decided on the server's estimate that the turn is complete, as
// with the in-process engine: the same user turns, the same decisions.
func TestPredictiveWithLlamaServer(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	scenario := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "demo.yaml")
	decisions := map[string][]string{}
	for _, engine := range []string{"llama", "http"} {
		cfg := demoConfig(t)
		if engine == "http" {
			cfg.LLM.Engine, cfg.LLM.URL = "http", srv.URL
		}
		res, rec := runReplay(t, cfg, scenario)
		if got, want := len(userTurns(res.History)), scenarioTurns["demo.yaml"]; got != want {
			t.Errorf("%s: user turns %q, want %d", engine, userTurns(res.History), want)
		}
		for _, e := range rec.turnEnds {
			if e.Reason == "" {
				continue // the VAD's own, which the policy's supersedes
			}
			// "complete (p=0.24–0.25)" → "complete": the server's estimate is a range.
			kind, _, _ := strings.Cut(e.Reason, " (p=")
			decisions[engine] = append(decisions[engine], kind)
		}
		t.Logf("%s: the turns ended %q", engine, rec.turnEnds)
	}
	if !slices.Equal(decisions["http"], decisions["llama"]) {
		t.Errorf("ends of turns with llama-server %q, in process %q", decisions["http"], decisions["llama"])
	}
	if !slices.Contains(decisions["http"], "complete") {
		t.Errorf("no turn ended on the server's estimate that it was complete: %q", decisions["http"])
	}
}
