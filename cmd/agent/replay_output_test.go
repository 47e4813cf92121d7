package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestReplayDemoOutput runs the README's main command in a new user's HOME: the files it
// says it wrote exist where it says, and on the virtual clock the latencies that are
// computation alone show "—", not "0 ms" (metrics.json: "unmeasured").
func TestReplayDemoOutput(t *testing.T) {
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	home := t.TempDir()
	code, stdout, stderr := runAgentBinary(t, userEnv(t, home), 3*time.Minute, "replay", "--config", "configs/demo.yaml", "configs/scenarios/demo.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	m := regexp.MustCompile(`(?m)^wrote (\S+): heard\.wav`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no output folder named:\n%s", stdout)
	}
	dir := m[1]
	if !strings.HasPrefix(dir, home) {
		t.Errorf("the replay wrote outside the user's HOME: %s", dir)
	}
	for _, name := range []string{"heard.wav", "agent.wav", "user.wav", "transcript.txt", "timeline.jsonl", "timeline.svg", "metrics.json", "session/session.json"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, line := range strings.Split(stdout, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		switch fields[0] {
		case "asr_final", "llm_first_token", "llm_first_clause", "tts_first_chunk":
			if !strings.Contains(line, "—") || strings.Contains(line, "ms") {
				t.Errorf("a computation latency on the virtual clock: %q", line)
			}
		case "voice_to_voice":
			if !strings.Contains(line, " ms") {
				t.Errorf("voice-to-voice is measurable on the virtual clock: %q", line)
			}
		}
	}
	if !strings.Contains(stdout, "replay with --clock real to measure it") {
		t.Errorf("no note on the unmeasured latencies:\n%s", stdout)
	}
	data, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mj struct {
		Summary map[string]map[string]any `json:"summary"`
	}
	if err := json.Unmarshal(data, &mj); err != nil {
		t.Fatal(err)
	}
	if s := mj.Summary["asr_final"]; s == nil || s["unmeasured"] != true || s["p50_ms"] != nil {
		t.Errorf("metrics.json asr_final: %v", s)
	}
	if s := mj.Summary["voice_to_voice"]; s == nil || s["p50_ms"] == nil {
		t.Errorf("metrics.json voice_to_voice: %v", s)
	}
}
