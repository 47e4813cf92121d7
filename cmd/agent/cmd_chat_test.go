package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/userdirs"
	"go.uber.org/zap"
)

// The chat itself is chat.Run's (tested there); these tests check the command:
// its flags, and the errors it reports for them.

// chatFixture is the demo config (stories260K, greedy, plain format with the roles
// Child and Storyteller) with its sessions in a temporary directory.
type chatFixture struct {
	cfgPath  string
	sessions string
	paths    userdirs.Paths
}

func newChatFixture(t *testing.T) chatFixture {
	t.Helper()
	shared := testenv.SharedDir(t)
	testenv.File(t, filepath.Join(shared, "models", "stories260K.gguf"), "the shared test assets")
	t.Setenv("PARLEY_SHARED", shared)
	routeNativeLogs(zap.NewNop()) // as run does; chatMain is called without it
	tmp := t.TempDir()
	f := chatFixture{
		cfgPath:  filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml"),
		sessions: filepath.Join(tmp, "sessions"),
	}
	f.paths = userdirs.Paths{Models: filepath.Join(tmp, "models"), Sessions: f.sessions, Logs: filepath.Join(tmp, "logs"), Config: filepath.Join(tmp, "no-config.yaml")}
	return f
}

// chat runs `agent chat` in-process on input and returns stdout, stderr and the error.
func (f chatFixture) chat(ctx context.Context, t *testing.T, input string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := f.chatTo(ctx, &out, &errOut, input, args...)
	return out.String(), errOut.String(), err
}

func (f chatFixture) chatTo(ctx context.Context, out, errOut *bytes.Buffer, input string, args ...string) error {
	a := &app{stdout: out, stderr: errOut, log: zap.NewNop(), paths: f.paths}
	return chatMain(ctx, a, append([]string{"--config", f.cfgPath}, args...), strings.NewReader(input), false)
}

func (f chatFixture) session(t *testing.T, name string) []dialogue.Utterance {
	t.Helper()
	s, err := dialogue.LoadSession(filepath.Join(f.sessions, name))
	if err != nil {
		t.Fatal(err)
	}
	return s.History.Utterances()
}

func TestChatErrors(t *testing.T) {
	f := newChatFixture(t)
	if _, errOut, err := f.chat(context.Background(), t, "Hello\n", "--session", "exists"); err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	missingModel := filepath.Join(t.TempDir(), "missing.yaml")
	if err := os.WriteFile(missingModel, []byte("llm:\n  model: /nonexistent/model.gguf\ndialogue:\n  prompt_format: plain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		wantUsage bool
		want      []string
	}{
		{"resume without a name", []string{"--resume"}, true, []string{"--resume needs the name of a saved session", "saved sessions: exists"}},
		{"resume of no session", []string{"--resume", "--session", "nope"}, false, []string{`no saved session "nope"`, "saved sessions: exists", "agent sessions"}},
		{"resume NAME of no session", []string{"--resume", "nope"}, false, []string{`no saved session "nope"`, "saved sessions: exists"}},
		{"resume and session differ", []string{"--resume=a", "--session", "b"}, true, []string{"different sessions"}},
		{"name of a saved session", []string{"--session", "exists"}, true, []string{"already exists", "--resume"}},
		{"unsafe name", []string{"--session", "../up"}, true, []string{"--session: invalid session name \"../up\"", "1 to 64 of A–Z"}},
		{"control bytes in the name", []string{"--session", "a\tb\x1b[2J"}, true, []string{`--session: invalid session name "a\tb\x1b[2J": it holds '\t'`}},
		{"a name too long", []string{"--resume", strings.Repeat("x", 300)}, true, []string{"--resume: invalid session name", "300 bytes long"}},
		{"negative --max-tokens", []string{"--max-tokens", "-3"}, true, []string{"must not be negative"}},
		{"-n is gone", []string{"-n", "3"}, true, []string{"not defined: -n"}},
		{"arguments", []string{"hello"}, true, []string{"no arguments"}},
		{"missing model", []string{"--config", missingModel}, false, []string{"/nonexistent/model.gguf", "agent models pull", "--config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := f.chat(context.Background(), t, "Hello\n", tt.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, errUsage) != tt.wantUsage {
				t.Errorf("%v: usage error %v, want %v", err, errors.Is(err, errUsage), tt.wantUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// Through the command line: exit statuses.
	if _, stderr, code := runAgent(t, "chat", "--config", missingModel); code != 1 || !strings.Contains(stderr, "agent models pull") {
		t.Errorf("missing model: exit %d, %q", code, stderr)
	}
}

// TestChatFlags: the flags reach the chat: --session names the saved session, --system
// the system prompt, --max-tokens the reply's length (greedy, so a shorter reply is a
// prefix of the longer one), and a resumed session continues with --resume, saying what
// it resumed.
func TestChatFlags(t *testing.T) {
	f := newChatFixture(t)
	stored := func(session string) string {
		utts := f.session(t, session)
		if len(utts) != 2 || utts[1].Speaker != dialogue.Agent {
			t.Fatalf("session %s holds %+v", session, utts)
		}
		return utts[1].Text
	}
	out, errOut, err := f.chat(context.Background(), t, "/system\nHello there\n", "--session", "long", "--system", "A dragon tells stories.")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	if !strings.HasPrefix(out, `system prompt: "A dragon tells stories."`) {
		t.Errorf("--system did not set the system prompt:\n%s", out)
	}
	full := stored("long")
	if !strings.Contains(out, "Storyteller: "+full+"\n") {
		t.Errorf("stored %q, printed\n%s", full, out)
	}
	if _, errOut, err := f.chat(context.Background(), t, "Hello there\n", "--max-tokens", "3", "--system", "A dragon tells stories.", "--session", "short"); err != nil {
		t.Fatalf("chat --max-tokens 3: %v\n%s", err, errOut)
	}
	if short := stored("short"); short == "" || len(short) >= len(full) || !strings.HasPrefix(full, short) {
		t.Errorf("--max-tokens 3 replied %q; the full reply is %q", short, full)
	}
	// Both spellings continue a saved session, and say which.
	for i, args := range [][]string{{"--session", "long", "--resume"}, {"--resume", "long"}} {
		_, errOut, err := f.chat(context.Background(), t, "Tell me more\n", args...)
		if err != nil {
			t.Fatalf("resumed chat %q: %v\n%s", args, err, errOut)
		}
		if !strings.Contains(errOut, "resuming session long (saved ") || !strings.Contains(errOut, fmt.Sprintf("%d turns; last: agent › ", 2+2*i)) {
			t.Errorf("resumed chat %q does not say what it resumed:\n%s", args, errOut)
		}
		if utts := f.session(t, "long"); len(utts) != 4+2*i || utts[2+2*i].Text != "Tell me more" {
			t.Errorf("resumed session holds %+v", utts)
		}
	}
}
