package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
)

// liveFixture is a private PulseAudio server whose default source is the monitor of a
// "room" sink (what is played into the room, the agent hears) and whose default sink
// stands for the speakers, and a user's temporary HOME.
type liveFixture struct {
	srv  *pulsetest.Server
	room pulsetest.Sink
	home string
	env  []string
	demo string
}

func newLiveFixture(t *testing.T) liveFixture {
	t.Helper()
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix) // stands for the en-us model
	srv := pulsetest.New(t)
	ctx := context.Background()
	room := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 16000, Channels: 1})
	out := srv.NullSink(t, "speakers", pulsetest.SinkOptions{Rate: 48000, Channels: 2})
	if err := srv.SetDefaultSource(ctx, room.Monitor); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSink(ctx, out.Name); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	return liveFixture{srv: srv, room: room, home: home, env: userEnv(t, home),
		demo: filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")}
}

// timelines lists the live timelines in the user's logs folder.
func (f liveFixture) timelines(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(f.home, ".local", "state", "parley", "live-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f liveFixture) sessionDir(name string) string {
	return filepath.Join(f.home, ".local", "share", "parley", "sessions", name)
}

// speak starts the live agent with args, waits until it listens, plays a recording into
// the room, and waits for the session file to hold the user's words (and, with
// wantAgent, the agent's reply too).
func (f liveFixture) speak(t *testing.T, session string, wantAgent bool, args ...string) *agentProcess {
	t.Helper()
	p := startAgent(t, f.env, nil, append([]string{"live", "--config", f.demo, "--log-modules", "input=info"}, args...)...)
	p.waitLine(t, "microphone open", time.Minute)
	if err := f.srv.Play(context.Background(), f.room.Name, testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := dialogue.LoadSession(f.sessionDir(session))
		if err == nil {
			utts := s.History.Utterances()
			if len(utts) > 0 && (!wantAgent || utts[len(utts)-1].Speaker == dialogue.Agent) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, session %s holds no %s; stderr:\n%s", session, map[bool]string{false: "user line", true: "reply"}[wantAgent], p.stderrText())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLiveFailedStart: a live session whose device cannot be opened ends with its error
// printed once, never says it is listening, and leaves no empty timeline behind.
func TestLiveFailedStart(t *testing.T) {
	f := newLiveFixture(t)
	code, stdout, stderr := runAgentBinary(t, f.env, 2*time.Minute, "live", "--config", f.demo, "--input", "Blue Yeti Nowhere")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "Listening") {
		t.Errorf("says it listens although the microphone failed:\n%s", stdout)
	}
	if n := strings.Count(stderr, "Blue Yeti Nowhere"); n != 1 || !strings.Contains(stderr, "agent live: ") {
		t.Errorf("the error is printed %d times, want once:\n%s", n, stderr)
	}
	if tl := f.timelines(t); len(tl) != 0 {
		t.Errorf("a failed start left timelines %v", tl)
	}
}

// TestLiveSessionSavedListedAndResumed: a live session says it listens, shows the
// conversation, and says where it saved the session; 'agent sessions' lists it and
// 'agent live --resume NAME' continues it, saying what it resumed. A lost device ends
// the session with a message that says where the conversation so far was saved.
func TestLiveSessionSavedListedAndResumed(t *testing.T) {
	f := newLiveFixture(t)
	p := f.speak(t, "talk", true, "--session", "talk", "--duration", "25s")
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("live exited %d; stderr:\n%s", code, p.stderrText())
	}
	out := p.stdout.String()
	t.Logf("live session:\n%s", out)
	listening := strings.Index(out, "Listening. Speak to the agent")
	you := strings.Index(out, "you   › ")
	if listening < 0 || you < listening {
		t.Errorf("'Listening' is not printed before the conversation:\n%s", out)
	}
	if want := "the session is saved in " + f.sessionDir("talk") + " (continue it with 'agent live --resume talk')"; !strings.Contains(out, want) {
		t.Errorf("the end does not say %q:\n%s", want, out)
	}
	if tl := f.timelines(t); len(tl) != 1 || !strings.Contains(out, "timeline in "+tl[0]) {
		t.Errorf("timelines %v; output:\n%s", tl, out)
	}
	// The console's times only go forward.
	var last float64
	for _, m := range regexp.MustCompile(`(?m)^\[ *([0-9.]+)s\] (you|agent) `).FindAllStringSubmatch(out, -1) {
		at, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		if at < last {
			t.Errorf("a line at %gs after one at %gs:\n%s", at, last, out)
		}
		last = at
	}

	code, list, stderr := runAgentBinary(t, f.env, time.Minute, "sessions")
	if code != 0 || !regexp.MustCompile(`talk\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+[2-9]\s+agent › \S`).MatchString(list) {
		t.Errorf("agent sessions: exit %d\n%s%s", code, list, stderr)
	}

	code, stdout, stderr := runAgentBinary(t, f.env, 2*time.Minute, "live", "--config", f.demo, "--resume", "talk", "--duration", "2s")
	if code != 0 || !regexp.MustCompile(`resuming session talk \(saved [0-9: -]+, [2-9] turns; last: agent › `).MatchString(stdout) {
		t.Errorf("resumed live session: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, _, stderr = runAgentBinary(t, f.env, 2*time.Minute, "live", "--config", f.demo, "--resume", "tlak")
	if code != 1 || !strings.Contains(stderr, `no saved session "tlak"`) || !strings.Contains(stderr, "saved sessions: talk") {
		t.Errorf("resuming a misspelt session: exit %d\n%s", code, stderr)
	}

	// The sound server dies in the middle of a session.
	p = f.speak(t, "lost", false, "--session", "lost")
	if err := f.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	code = p.wait(t, time.Minute)
	stderr = p.stderrText()
	t.Logf("device lost:\n%s", stderr)
	if code != 1 || !strings.Contains(stderr, "the session is saved in "+f.sessionDir("lost")) {
		t.Errorf("device lost: exit %d; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(f.sessionDir("lost"), dialogue.SessionFile)); err != nil {
		t.Error(err)
	}
}
