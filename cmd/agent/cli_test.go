package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestHelpAndVersion: help that was asked for goes to standard output with exit status 0;
// the usage after a mistake goes to standard error with status 2; --version names the
// agent's version and the native libraries it links.
func TestHelpAndVersion(t *testing.T) {
	env := userEnv(t, t.TempDir())
	for _, tt := range []struct {
		args       []string
		code       int
		stdout     string // what standard output must hold ("" : nothing at all)
		stderr     string
		stderrNone bool
	}{
		{args: []string{"--help"}, stdout: "usage: agent [global flags] COMMAND", stderrNone: true},
		{args: []string{"-h"}, stdout: "global flags (before or after the command)", stderrNone: true},
		{args: []string{"help"}, stdout: "sessions ", stderrNone: true},
		{args: []string{"replay", "-h"}, stdout: "usage: agent replay [flags] SCENARIO.yaml|FILE.wav", stderrNone: true},
		{args: []string{"replay", "--help"}, stdout: "-o string", stderrNone: true},
		{args: []string{"--version"}, stdout: "libllama", stderrNone: true},
		{args: nil, code: 2, stderr: "usage: agent"},
		{args: []string{"--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"replay", "--bogus"}, code: 2, stderr: "usage: agent replay"},
	} {
		code, stdout, stderr := runAgentBinary(t, env, time.Minute, tt.args...)
		if code != tt.code {
			t.Errorf("agent %q: exit %d, want %d\n%s%s", tt.args, code, tt.code, stdout, stderr)
		}
		if tt.stdout != "" && !strings.Contains(stdout, tt.stdout) {
			t.Errorf("agent %q: standard output lacks %q:\n%s", tt.args, tt.stdout, stdout)
		}
		if tt.stdout == "" && stdout != "" {
			t.Errorf("agent %q: printed to standard output:\n%s", tt.args, stdout)
		}
		if tt.stderr != "" && !strings.Contains(stderr, tt.stderr) {
			t.Errorf("agent %q: standard error lacks %q:\n%s", tt.args, tt.stderr, stderr)
		}
		if tt.stderrNone && stderr != "" {
			t.Errorf("agent %q: printed to standard error:\n%s", tt.args, stderr)
		}
	}
	_, stdout, _ := runAgentBinary(t, env, time.Minute, "--version")
	for _, want := range []string{"agent ", "ggml", "libwhisper", "portaudio", "espeak-ng"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--version lacks %q:\n%s", want, stdout)
		}
	}
}

// logEntries reads a JSON-lines log file into its entries.
func logEntries(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// TestGlobalFlagsAfterTheCommand: the logging flags work after the command's name (and
// its arguments) as well as before it; the native libraries' own lines go to the log
// file at debug level under their names, never to the console.
func TestGlobalFlagsAfterTheCommand(t *testing.T) {
	jfk := testenv.SharedFile(t, "audio/jfk.wav")
	stories := testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	env := userEnv(t, t.TempDir())
	tmp := t.TempDir()

	logFile := filepath.Join(tmp, "vad.jsonl")
	code, stdout, stderr := runAgentBinary(t, env, 2*time.Minute, "vad", jfk, "--log-level", "debug", "--log-file="+logFile, "-quiet")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "0.") {
		t.Fatalf("agent vad with global flags after it: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	loggers := map[string]int{}
	for _, e := range logEntries(t, logFile) {
		name, _ := e["logger"].(string)
		loggers[name]++
		if name == "whisper" && e["level"] != "debug" {
			t.Errorf("libwhisper's line at %v, want debug: %v", e["level"], e)
		}
	}
	if loggers["whisper"] == 0 {
		t.Errorf("the debug log lacks libwhisper's lines: %v", loggers)
	}
	known := logModuleNames()
	for name := range loggers {
		if first, _, _ := strings.Cut(name, "."); !slices.Contains(known, first) {
			t.Errorf("logger %q is not among the names --log-modules takes (%v)", name, known)
		}
	}

	// Without debug, nothing of llama.cpp's or ggml's reaches the console.
	code, stdout, stderr = runAgentBinary(t, env, 2*time.Minute, "generate", "--model", stories, "--max-tokens", "8", "Once upon a time")
	if code != 0 || strings.TrimSpace(stdout) == "" {
		t.Fatalf("agent generate: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, native := range []string{"llama_", "ggml_", "load_backend", "print_info", "graph_compute"} {
		if strings.Contains(stderr, native) {
			t.Errorf("a native library's line reached the console (%q):\n%s", native, stderr)
		}
	}
	// With it, they are in the log, under "llama", as log entries on the console too.
	logFile = filepath.Join(tmp, "generate.jsonl")
	code, _, stderr = runAgentBinary(t, env, 2*time.Minute, "generate", "--model", stories, "--max-tokens", "8", "Once upon a time", "--log-modules", "llama=debug", "--log-file", logFile)
	if code != 0 {
		t.Fatalf("agent generate --log-modules llama=debug: exit %d; console:\n%s", code, stderr)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "llama_model_loader") && !strings.Contains(line, "DEBUG\tllama\t") {
			t.Errorf("llama.cpp's line on the console is not a log entry: %q", line)
		}
	}
	n := 0
	for _, e := range logEntries(t, logFile) {
		if e["logger"] == "llama" && strings.Contains(e["msg"].(string), "llama_model_loader") {
			n++
		}
	}
	if n == 0 {
		t.Errorf("the log file has none of llama.cpp's model loading lines")
	}
}

// TestLogModulesNamesChecked: --log-modules takes the names the agent logs under and
// refuses others, listing the known ones.
func TestLogModulesNamesChecked(t *testing.T) {
	env := userEnv(t, t.TempDir())
	code, _, stderr := runAgentBinary(t, env, time.Minute, "sessions", "--log-modules", "asr=debug,spekaer=warn")
	if code != 2 || !strings.Contains(stderr, `unknown module "spekaer"`) || !strings.Contains(stderr, "speaker") || !strings.Contains(stderr, "llama") {
		t.Errorf("a misspelt module: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr := runAgentBinary(t, env, time.Minute, "--log-modules", "asr.whisper=debug,llm=warn,history=info", "sessions"); code != 0 {
		t.Errorf("known modules refused: exit %d\n%s%s", code, stdout, stderr)
	}
}
