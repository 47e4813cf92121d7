package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestSessionsCommand: a chat's session is listed by 'agent sessions' with its date,
// turns and last line, and resumed by name; a session folder that is a symbolic link
// is refused; asking for a session that does not exist lists those that do.
func TestSessionsCommand(t *testing.T) {
	testenv.SharedFile(t, "models/stories260K.gguf")
	home := t.TempDir()
	env := userEnv(t, home)
	demo := filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")
	input := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(input, []byte("Hello there\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chat := func(args ...string) (int, string, string) {
		t.Helper()
		in, err := os.Open(input)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		p := startAgent(t, env, in, append([]string{"chat", "--config", demo}, args...)...)
		code := p.wait(t, 2*time.Minute)
		return code, p.stdout.String(), p.stderrText()
	}
	if code, _, stderr := runAgentBinary(t, env, time.Minute, "sessions"); code != 0 {
		t.Fatalf("sessions with none saved: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr := chat("--session", "first"); code != 0 {
		t.Fatalf("chat: exit %d\n%s%s", code, stdout, stderr)
	}
	sessions := filepath.Join(home, ".local", "share", "parley", "sessions")
	if err := os.Symlink(filepath.Join(sessions, "first"), filepath.Join(sessions, "linked")); err != nil {
		t.Fatal(err)
	}
	code, list, stderr := runAgentBinary(t, env, time.Minute, "sessions")
	if code != 0 || !regexp.MustCompile(`(?m)^  first\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+2\s+agent › \S`).MatchString(list) ||
		!regexp.MustCompile(`(?m)^  linked\s+-\s+-\s+cannot be read: .*a symbolic link, not a directory`).MatchString(list) {
		t.Errorf("agent sessions: exit %d\n%s%s", code, list, stderr)
	}
	code, _, stderr = chat("--resume", "first")
	if code != 0 || !regexp.MustCompile(`resuming session first \(saved [0-9: -]+, 2 turns; last: agent › `).MatchString(stderr) {
		t.Errorf("resumed chat: exit %d\n%s", code, stderr)
	}
	if code, _, stderr = chat("--resume", "linked"); code == 0 || !strings.Contains(stderr, "a symbolic link, not a directory") {
		t.Errorf("resuming a symlinked session folder: exit %d\n%s", code, stderr)
	}
	if code, _, stderr = chat("--resume", "frist"); code == 0 || !strings.Contains(stderr, `no saved session "frist"`) || !regexp.MustCompile(`saved sessions: (first, linked|linked, first) \(see 'agent sessions'\)`).MatchString(stderr) {
		t.Errorf("resuming a misspelt session: exit %d\n%s", code, stderr)
	}
}
