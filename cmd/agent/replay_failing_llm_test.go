package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestReplayFailedLLMTurnNotStored: a replay whose LLM server fails every request says
// so on the console, and neither the history nor the transcript holds an empty agent
// turn for it.
func TestReplayFailedLLMTurnNotStored(t *testing.T) {
	question := testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" {
			http.Error(w, `{"error":{"message":"the model is on fire"}}`, http.StatusInternalServerError)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	tmp := t.TempDir()
	config := filepath.Join(tmp, "failing.yaml")
	if err := os.WriteFile(config, []byte(`vad:
  model: ${PARLEY_SHARED}/models/ggml-silero-v6.2.0.bin
asr: {engine: pocketsphinx}
llm: {engine: http, url: "`+srv.URL+`", max_tokens: 16, context: 512}
dialogue: {prompt_format: plain}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(tmp, "two.yaml")
	if err := os.WriteFile(scenario, []byte("tail: 3\nrecordings:\n  - file: "+question+"\n    at: 0.3\n  - file: "+question+"\n    at: 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	code, stdout, stderr := runAgentBinary(t, userEnv(t, t.TempDir()), 3*time.Minute, "replay", "--config", config, "-o", out, scenario)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout, "(the LLM failed: "); n != 2 || !strings.Contains(stdout, "the model is on fire") || strings.Contains(stdout+stderr, "unreachable") {
		t.Errorf("the console does not report the two failures as they were (%d):\n%s%s", n, stdout, stderr)
	}
	if strings.Contains(stdout, "agent ›") {
		t.Errorf("the console shows an agent turn:\n%s", stdout)
	}
	s, err := dialogue.LoadSession(filepath.Join(out, "session"))
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, u := range s.History.Utterances() {
		switch {
		case u.Speaker == dialogue.Agent:
			t.Errorf("the history holds an agent turn nobody said: %+v", u)
		case u.Text != "":
			users++
		}
	}
	if users != 2 {
		t.Errorf("the history holds %d user turns, want 2: %+v", users, s.History.Utterances())
	}
	transcript, err := os.ReadFile(filepath.Join(out, "transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(transcript), "agent") {
		t.Errorf("transcript.txt holds an agent line:\n%s", transcript)
	}
}
