package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/internal/testenv"
)

// hangLimit is how long a command given a FIFO may take before the test calls it hung.
// Failing fast takes well under a second; the limit only has to tell "fails" from "waits
// forever" on a busy machine.
const hangLimit = 60 * time.Second

// TestFilesThatWouldBlockAreRefused gives the real commands a FIFO (and a device) where a
// model, WAV, config, scenario, recording, session or timeline file belongs. Opening a FIFO
// for reading waits for a writer, so before the fix each of these hung in open(). Every
// command must end with an error that names the path and says what it is.
func TestFilesThatWouldBlockAreRefused(t *testing.T) {
	shared := testenv.SharedDir(t)
	jfk := testenv.SharedFile(t, "audio/jfk.wav")
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix) // stands for the en-us model
	demo := filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")
	scenario := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "demo.yaml")

	tmp := t.TempDir()
	fifo := func(rel string) string {
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(rel, content string) string {
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}

	wav := fifo("in/fifo.wav")
	model := fifo("in/model.bin")
	gguf := fifo("in/model.gguf")
	config := fifo("in/config.yaml")
	scenarioFIFO := fifo("in/scenario.yaml")
	timeline := fifo("in/timeline.jsonl")
	lm := fifo("in/en-us.lm.bin")
	// A copy of the en-us acoustic model with one of its files replaced by a FIFO.
	hmm := filepath.Join(tmp, "hmm")
	enUS, _, _ := pocketsphinx.DefaultModel()
	entries, err := os.ReadDir(enUS)
	if err != nil {
		testenv.Missing(t, "pocketsphinx's en-us model", testenv.EnvFix)
	}
	for _, e := range entries {
		if e.Name() == "means" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(enUS, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join("hmm", e.Name()), string(data))
	}
	means := fifo("hmm/means")
	recordingScenario := write("in/recording.yaml", "recordings:\n  - file: "+wav+"\n    at: 0.5\n")
	llmConfig := write("in/llm.yaml", "llm: {engine: llama, model: "+gguf+"}\n")
	sessions := filepath.Join(tmp, "sessions")
	sessionFile := fifo("sessions/s1/session.json")
	modelsDir := filepath.Join(tmp, "models")
	fifo("models/ggml-silero-v6.2.0.bin")

	defaultConfig := filepath.Join(home, ".config", "parley", "config.yaml")
	tests := []struct {
		name  string
		env   []string
		args  []string
		path  string // the path the error must name
		what  string // what it must say the path is
		setup func(t *testing.T)
	}{
		{name: "transcribe WAV", args: []string{"transcribe", wav}, path: wav},
		{name: "vad WAV", args: []string{"vad", wav}, path: wav},
		{name: "transcribe a device", args: []string{"transcribe", "/dev/zero"}, path: "/dev/zero", what: "a character device"},
		{name: "replay WAV", args: []string{"replay", "--config", demo, "-o", filepath.Join(tmp, "out1"), wav}, path: wav},
		{name: "replay scenario", args: []string{"replay", "--config", demo, "-o", filepath.Join(tmp, "out2"), scenarioFIFO}, path: scenarioFIFO},
		{name: "scenario recording", args: []string{"replay", "--config", demo, "-o", filepath.Join(tmp, "out3"), recordingScenario}, path: wav},
		{name: "replay --config", args: []string{"replay", "--config", config, scenario}, path: config},
		{name: "chat --config", args: []string{"chat", "--config", config}, path: config},
		{name: "PARLEY_CONFIG", env: []string{"PARLEY_CONFIG=" + config}, args: []string{"chat"}, path: config},
		{name: "default config file", args: []string{"replay", scenario}, path: defaultConfig, setup: func(t *testing.T) {
			if err := os.MkdirAll(filepath.Dir(defaultConfig), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(defaultConfig, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(defaultConfig) })
		}},
		{name: "VAD model", args: []string{"vad", "--vad-model", model, jfk}, path: model},
		{name: "whisper model", args: []string{"transcribe", "--engine", "whisper", "--model", model, jfk}, path: model},
		{name: "pocketsphinx language model", args: []string{"transcribe", "--ps-lm", lm, jfk}, path: lm},
		{name: "pocketsphinx acoustic model", args: []string{"transcribe", "--ps-hmm", hmm, jfk}, path: means},
		{name: "llama model", args: []string{"generate", "--model", gguf, "--max-tokens", "4", "hello"}, path: gguf},
		{name: "llama model in the config", args: []string{"replay", "--config", llmConfig, "-o", filepath.Join(tmp, "out4"), jfk}, path: gguf},
		{name: "models verify", env: []string{"PARLEY_MODELS=" + modelsDir}, args: []string{"models", "verify"}, path: filepath.Join(modelsDir, "ggml-silero-v6.2.0.bin")},
		{name: "session file", env: []string{"PARLEY_SESSIONS=" + sessions}, args: []string{"chat", "--config", demo, "--session", "s1", "--resume"}, path: filepath.Base(sessionFile)},
		{name: "plot", args: []string{"plot", timeline}, path: timeline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			what := tt.what
			if what == "" {
				what = "a FIFO"
			}
			env := userEnv(t, home, append([]string{"PARLEY_SHARED=" + shared}, tt.env...)...)
			code, stdout, stderr := runAgentBinary(t, env, hangLimit, append([]string{"--quiet"}, tt.args...)...)
			want := tt.path + " is " + what + ", not a regular file"
			if code == 0 || !strings.Contains(stdout+stderr, want) {
				t.Fatalf("agent %s: exit %d; the output does not say %q:\n%s%s", strings.Join(tt.args, " "), code, want, stdout, stderr)
			}
		})
	}
}
