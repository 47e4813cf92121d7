package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigCommand: 'agent config' prints the defaults merged with the given file,
// with the comments and the defaults of what the file changed; the user's own config
// file when none is given; the Markdown reference on request; and mistakes are usage
// errors.
func TestConfigCommand(t *testing.T) {
	home := t.TempDir()
	env := userEnv(t, home)
	for _, tt := range []struct {
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{args: []string{"config"}, stdout: []string{"# Parley's configuration: the built-in defaults.\n", "\n  engine: whisper\n",
			"  # max_tokens limits each reply.\n  max_tokens: 120\n", filepath.Join(home, ".local/share/parley/models/ggml-tiny.en.bin")}},
		{args: []string{"config", "--config", "configs/demo.yaml"}, stdout: []string{"merged with configs/demo.yaml.",
			"  engine: pocketsphinx # default: whisper\n", "  max_tokens: 24 # default: 120\n"}},
		{args: []string{"config", "--markdown"}, stdout: []string{"# Configuration reference\n", "| `max_tokens` | `120` | max_tokens limits each reply. |\n",
			"`~/.local/share/parley/models/ggml-tiny.en.bin`"}},
		{args: []string{"config", "--markdown", "--config", "configs/demo.yaml"}, code: 2, stderr: "takes no --config"},
		{args: []string{"config", "extra"}, code: 2, stderr: "config takes no arguments"},
		{args: []string{"config", "--config", "no-such-file.yaml"}, code: 1, stderr: "no-such-file.yaml"},
	} {
		code, stdout, stderr := runAgentBinary(t, env, time.Minute, tt.args...)
		if code != tt.code {
			t.Errorf("agent %q: exit %d, want %d\n%s%s", tt.args, code, tt.code, stdout, stderr)
			continue
		}
		for _, want := range tt.stdout {
			if !strings.Contains(stdout, want) {
				t.Errorf("agent %q: standard output lacks %q:\n%s", tt.args, want, stdout)
			}
		}
		if !strings.Contains(stderr, tt.stderr) {
			t.Errorf("agent %q: standard error lacks %q:\n%s", tt.args, tt.stderr, stderr)
		}
	}
	// The user's config file is the one used without --config.
	dir := filepath.Join(home, ".config", "parley")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("llm:\n  max_tokens: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAgentBinary(t, env, time.Minute, "config")
	if code != 0 || !strings.Contains(stdout, "merged with "+filepath.Join(dir, "config.yaml")) || !strings.Contains(stdout, "  max_tokens: 50 # default: 120\n") {
		t.Errorf("with the user's config file: exit %d\n%s%s", code, stdout, stderr)
	}
}
