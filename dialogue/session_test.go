package dialogue

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	crashDirEnv  = "PARLEY_DIALOGUE_CRASH_DIR"
	crashModeEnv = "PARLEY_DIALOGUE_CRASH_MODE"
	crashKVSize  = 1 << 16
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		os.Exit(crashHelper(dir, os.Getenv(crashModeEnv)))
	}
	os.Exit(m.Run())
}

// crashText is long enough that saving takes a while.
func crashText(i int) string {
	return fmt.Sprintf("utterance %d: %s", i, strings.Repeat("lorem ipsum dolor sit amet ", 80))
}

// crashHelper runs in a subprocess: it resumes the session in dir (if any), then appends
// utterances forever with auto-save, printing "saved N" once AppendUtterance has
// returned. In mode "kv" it also saves the KV state after every utterance, and the third
// KV write stops half-way (printing "kv-writing") until the test kills it, so the kill
// lands in the middle of a write.
func crashHelper(dir, mode string) int {
	ctx := context.Background()
	f, err := BuiltinFormat("plain")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h := NewHistory(f, "S")
	if loaded, err := LoadSession(dir); err == nil {
		h = loaded.History
	} else if !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 2
	}
	s, err := NewStore(ctx, h, BufferMemory(), StoreConfig{AutoSaveDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	kvSaves := 0
	kv := func(path string) error {
		kvSaves++
		data := bytes.Repeat([]byte{byte(kvSaves)}, crashKVSize)
		if kvSaves < 3 {
			return os.WriteFile(path, data, 0o600)
		}
		if err := os.WriteFile(path, data[:crashKVSize/2], 0o600); err != nil {
			return err
		}
		fmt.Fprintln(os.Stdout, "kv-writing")
		_, err := os.Stdin.Read(make([]byte, 1)) // blocks: the test never writes
		return err
	}
	for i := h.Len(); ; i++ {
		speaker := User
		if i%2 == 1 {
			speaker = Agent
		}
		if err := s.AppendUtterance(ctx, Utterance{Speaker: speaker, Text: crashText(i), TurnID: i/2 + 1}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintf(os.Stdout, "saved %d\n", i) // unbuffered: one write per line
		if mode == "kv" {
			if err := s.Save(ctx, dir, kv); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
	}
}

// A process that saves after every turn and is killed mid-way loses no finished turn,
// and resuming after the crash goes on where it stopped.
func TestCrashLosesNoFinishedTurn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "session")
	reported := -1
	rounds := []struct {
		mode      string
		killAfter int // "saved" lines; in mode kv the kill comes at "kv-writing"
	}{{"turns", 3}, {"kv", 0}, {"turns", 8}, {"turns", 1}, {"kv", 0}, {"turns", 13}}
	for round, r := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashModeEnv+"="+r.mode)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe() // kept open and silent: the blocked KV write waits on it
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for n := 0; sc.Scan(); {
			line := sc.Text()
			if line == "kv-writing" {
				break
			}
			i, err := strconv.Atoi(strings.TrimPrefix(line, "saved "))
			if err != nil {
				t.Fatalf("helper said %q", line)
			}
			if i != reported+1 {
				t.Fatalf("round %d: helper saved %d after %d: it did not resume where it stopped", round, i, reported)
			}
			reported = i
			if n++; r.mode == "turns" && n == r.killAfter {
				break
			}
		}
		// Kill it while it is writing the next turn, or half-way through the KV state.
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: helper ended with %v before it was killed: %s", round, err, stderr.String())
		}

		loaded, err := LoadSession(dir)
		if err != nil {
			t.Fatalf("round %d: the session does not load after the crash: %v", round, err)
		}
		utts := loaded.History.Utterances()
		if len(utts) < reported+1 {
			t.Fatalf("round %d: %d utterances reported saved, %d in the session", round, reported+1, len(utts))
		}
		for i, u := range utts {
			if u.Text != crashText(i) {
				t.Fatalf("round %d: utterance %d is %q", round, i, u.Text[:min(len(u.Text), 30)])
			}
		}
		if r.mode == "kv" {
			// The session names the last complete KV state, never the half-written one.
			kv, err := os.ReadFile(loaded.KVPath)
			if err != nil || len(kv) != crashKVSize || kv[0] != 2 {
				t.Fatalf("round %d: KV state %q: %d bytes, %v", round, loaded.KVPath, len(kv), err)
			}
			temps, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
			if len(temps) == 0 {
				t.Fatalf("round %d: the kill did not land mid-write", round)
			}
		}
		// Whatever the helper saved beyond what it reported is a finished turn too.
		reported = len(utts) - 1
	}
}

func TestSessionRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	sum := &scriptedSummarizer{}
	h := NewHistory(mustFormat(t, "llama2"), "S", WithInterruptedMark("..."))
	s := newTestStore(t, h, SummaryMemory(), StoreConfig{Summarizer: sum})
	for _, u := range goalConversation(3) {
		if err := s.AppendUtterance(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitSummaries(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSystemPrompt(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	kv := []byte("opaque llama.cpp state \x00\x01\x02")
	if err := s.Save(ctx, dir, KVBytes(kv)); err != nil {
		t.Fatal(err)
	}
	want, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantMem, _ := s.MemoryState(ctx)

	loaded, err := LoadSession(dir)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Version != SessionVersion || loaded.SavedAt.IsZero() {
		t.Errorf("version %d saved at %v", loaded.Version, loaded.SavedAt)
	}
	if !reflect.DeepEqual(loaded.History, want) {
		t.Errorf("history\n%+v\nwant\n%+v", loaded.History, want)
	}
	if loaded.History.SystemPrompt() != "T" || loaded.History.InitialSystemPrompt() != "S" {
		t.Errorf("system prompts %q %q", loaded.History.SystemPrompt(), loaded.History.InitialSystemPrompt())
	}
	if !reflect.DeepEqual(loaded.Memory, wantMem) || wantMem.Covered == 0 {
		t.Errorf("memory %+v, want %+v", loaded.Memory, wantMem)
	}
	got, err := os.ReadFile(loaded.KVPath)
	if err != nil || !bytes.Equal(got, kv) {
		t.Errorf("KV state %q, %v", got, err)
	}
	h2, mem2, err := loaded.Restore(nil)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Prompt(ForTurn(4)) != want.Prompt(ForTurn(4)) || !reflect.DeepEqual(mem2.State(), wantMem) {
		t.Error("restored history or memory differs")
	}

	// File modes: private to the user.
	for _, name := range []string{SessionFile, filepath.Base(loaded.KVPath)} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", name, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v", fi.Mode().Perm())
	}

	// Saving again without KV keeps the KV file; saving with new KV replaces it.
	if err := s.Save(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	again, err := LoadSession(dir)
	if err != nil || again.KVPath != loaded.KVPath {
		t.Fatalf("KV file after a save without KV: %q (%v), want %q", again.KVPath, err, loaded.KVPath)
	}
	if err := s.Save(ctx, dir, KVBytes([]byte("new"))); err != nil {
		t.Fatal(err)
	}
	third, err := LoadSession(dir)
	if err != nil {
		t.Fatal(err)
	}
	if third.KVPath == loaded.KVPath {
		t.Error("new KV state written under the old name")
	}
	if _, err := os.Stat(loaded.KVPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old KV file left behind: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v", names)
	}
}

func TestAutoSave(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "auto")
	s := newTestStore(t, NewHistory(mustFormat(t, "plain"), "S"), nil, StoreConfig{AutoSaveDir: dir})
	for i, u := range conversation(3) {
		if err := s.AppendUtterance(ctx, u); err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadSession(dir)
		if err != nil {
			t.Fatal(err)
		}
		if loaded.History.Len() != i+1 {
			t.Fatalf("after %d appends the saved session has %d utterances", i+1, loaded.History.Len())
		}
	}
	if _, err := s.CutInterrupted(ctx, Heard{Position: Position{TurnID: 3, WordStart: 0, WordEnd: 2, WordFraction: 0.1}, Clauses: []string{"a3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSystemPrompt(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadSession(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := loaded.History.AgentUtterance(3); !u.Interrupted || u.Text != "" || loaded.History.SystemPrompt() != "T" {
		t.Errorf("saved session misses the cut or the system prompt: %+v %q", u, loaded.History.SystemPrompt())
	}
}

func TestSessionRefusesUnsafePaths(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside.json")
	dir := filepath.Join(base, "s")
	h := NewHistory(mustFormat(t, "plain"), "S")
	appendAll(t, h, conversation(1)...)
	if err := SaveSession(dir, Session{History: h}, nil); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, SessionFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, good, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("kv_file leaving the directory", func(t *testing.T) {
		for _, name := range []string{"../outside.json", "/etc/passwd", "kv-../../x.bin", "sub/kv-a.bin"} {
			data := strings.Replace(string(good), `"version": 1,`, `"version": 1, "kv_file": `+strconv.Quote(name)+`,`, 1)
			if _, err := ParseSession([]byte(data)); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("%q: %v", name, err)
			}
		}
	})
	t.Run("session file is a symlink", func(t *testing.T) {
		d := filepath.Join(base, "link")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(d, SessionFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadSession(d); err == nil {
			t.Error("loaded through a symlink")
		}
		if err := SaveSession(d, Session{History: h}, nil); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("saved over a symlink: %v", err)
		}
		if data, _ := os.ReadFile(outside); !bytes.Equal(data, good) {
			t.Error("the file outside was changed")
		}
	})
	t.Run("kv file is a symlink", func(t *testing.T) {
		d := filepath.Join(base, "kvlink")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		data := strings.Replace(string(good), `"version": 1,`, `"version": 1, "kv_file": "kv-abc.bin",`, 1)
		if err := os.WriteFile(filepath.Join(d, SessionFile), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(d, "kv-abc.bin")); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadSession(d); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("KV symlink: %v", err)
		}
	})
	t.Run("session names", func(t *testing.T) {
		long := strings.Repeat("a", MaxSessionNameLen+1)
		for _, name := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".hidden", "x\x00", "tab\tand\x1b[31mred", "-rf", "é", "two words", long} {
			_, err := SessionPath(base, name)
			if !errors.Is(err, ErrUnsafePath) || !errors.Is(ValidSessionName(name), ErrSessionName) ||
				!strings.Contains(err.Error(), "a session name is 1 to 64 of A–Z, a–z, 0–9, '.', '_' and '-'") {
				t.Errorf("%q: %v", name, err)
			}
			if strings.ContainsAny(err.Error(), "\t\x00\x1b") {
				t.Errorf("%q: the error holds the control bytes themselves: %q", name, err)
			}
		}
		for _, name := range []string{"lesson-1", "2025-01-02T10-11-12", "a.b_c", strings.Repeat("x", MaxSessionNameLen)} {
			if p, err := SessionPath(base, name); err != nil || p != filepath.Join(base, name) {
				t.Errorf("good name %q: %q %v", name, p, err)
			}
		}
	})
}

func TestParseSessionVersions(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "S")
	data, err := json.Marshal(Session{Version: SessionVersion, History: h, Memory: MemoryState{Strategy: StrategyBuffer}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSession(data); err != nil {
		t.Fatalf("current version: %v", err)
	}
	tests := []struct {
		name    string
		data    string
		wantErr error
		wantMsg string
	}{
		{"newer", strings.Replace(string(data), `"version":1`, `"version":2`, 1), ErrNewerSession, "session format 2, this build reads formats up to 1"},
		{"no version", strings.Replace(string(data), `"version":1,`, ``, 1), ErrInvalidSession, "no valid format version"},
		{"version zero", strings.Replace(string(data), `"version":1`, `"version":0`, 1), ErrInvalidSession, "version"},
		{"version not a number", strings.Replace(string(data), `"version":1`, `"version":"1"`, 1), ErrInvalidSession, ""},
		{"no history", `{"version":1}`, ErrInvalidSession, "no history"},
		{"memory past the history", strings.Replace(string(data), `"strategy":"buffer"`, `"strategy":"summary","covered":5`, 1), ErrInvalidSession, "covers 5"},
		{"bad speaker", `{"version":1,"history":{"format":{"user":{"role":"A"},"agent":{"role":"B"}},"utterances":[{"speaker":"robot"}]}}`, ErrInvalidSession, "speaker"},
		{"not json", `version 1`, ErrInvalidSession, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSession([]byte(tc.data))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message %q lacks %q", err, tc.wantMsg)
			}
		})
	}
}

func FuzzParseSession(f *testing.F) {
	h := NewHistory(mustFormat(f, "llama2"), "S")
	appendAll(f, h, goalConversation(2)...)
	for _, mem := range []MemoryState{{Strategy: StrategyBuffer}, {Strategy: StrategySummary, Summary: "x", Covered: 2}} {
		data, err := json.Marshal(Session{Version: 1, History: h, Memory: mem, KVFile: "kv-a1.bin"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSession(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidSession) && !errors.Is(err, ErrNewerSession) && !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		h, mem, err := s.Restore(wordTokenizer{})
		if err != nil {
			t.Fatal(err)
		}
		// A session that parses can be used and saved again.
		mem.View(h.utterances, h.selected(PromptOptions{}))
		h.Prompt(PromptOptions{})
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSession(out); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

// TestSessionFolderSymlinkRefused: a session folder that is a symbolic link is refused
// for loading and saving, like a symlinked session file; the folder holding the sessions
// may be a link.
func TestSessionFolderSymlinkRefused(t *testing.T) {
	h := NewHistory(mustFormat(t, "plain"), "sys")
	h.Append(Utterance{Speaker: User, Text: "hello", TurnID: 1})
	tmp := t.TempDir()
	elsewhere := filepath.Join(tmp, "elsewhere")
	if err := SaveSession(elsewhere, Session{History: h}, nil); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(elsewhere, SessionFile))
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tmp, "sessions")
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "linked")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSession(link); !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), "a symbolic link, not a directory") {
		t.Errorf("loaded a session through a symlinked folder: %v", err)
	}
	h.Append(Utterance{Speaker: Agent, Text: "hi", TurnID: 2})
	if err := SaveSession(link, Session{History: h}, nil); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("saved through a symlinked folder: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(elsewhere, SessionFile)); !bytes.Equal(after, before) {
		t.Error("the session the link points at was changed")
	}
	// The sessions folder itself may be a link.
	baseLink := filepath.Join(tmp, "sessions-link")
	if err := os.Symlink(base, baseLink); err != nil {
		t.Fatal(err)
	}
	if err := SaveSession(filepath.Join(baseLink, "real"), Session{History: h}, nil); err != nil {
		t.Errorf("saving below a linked sessions folder: %v", err)
	}
	if _, err := LoadSession(filepath.Join(baseLink, "real")); err != nil {
		t.Errorf("loading below a linked sessions folder: %v", err)
	}
}

func TestListSessions(t *testing.T) {
	base := t.TempDir()
	if got, err := ListSessions(filepath.Join(base, "none")); err != nil || got != nil {
		t.Fatalf("no sessions folder: %v %v", got, err)
	}
	h := NewHistory(mustFormat(t, "plain"), "sys")
	h.Append(Utterance{Speaker: User, Text: "hello", TurnID: 1})
	h.Append(Utterance{Speaker: Agent, Text: "Once upon a time.", TurnID: 2})
	older := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := SaveSession(filepath.Join(base, "b-newer"), Session{History: h, SavedAt: older.Add(time.Hour)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := SaveSession(filepath.Join(base, "a-older"), Session{History: NewHistory(mustFormat(t, "plain"), ""), SavedAt: older}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "not-a-session"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "broken"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "broken", SessionFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ListSessions(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "broken" || got[0].Err == nil || got[1].Name != "a-older" || got[2].Name != "b-newer" {
		t.Fatalf("sessions %+v", got)
	}
	if s := got[2]; s.Turns != 2 || s.Last.Text != "Once upon a time." || s.Last.Speaker != Agent || !s.SavedAt.Equal(older.Add(time.Hour)) {
		t.Errorf("newer session %+v", s)
	}
	if s := got[1]; s.Turns != 0 || s.Last.Text != "" {
		t.Errorf("empty session %+v", s)
	}
}

// FuzzValidSessionName: every accepted name is a safe, portable folder name of at most
// MaxSessionNameLen bytes, and SessionPath keeps it inside the base.
func FuzzValidSessionName(f *testing.F) {
	for _, s := range []string{"lesson-1", "", "..", "a/b", "a\tb", strings.Repeat("x", 65), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidSessionName(name) != nil {
			if _, err := SessionPath("/base", name); err == nil {
				t.Fatalf("SessionPath accepted %q, which ValidSessionName refuses", name)
			}
			return
		}
		if len(name) == 0 || len(name) > MaxSessionNameLen || !filepath.IsLocal(name) || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "-") {
			t.Fatalf("accepted %q", name)
		}
		for _, r := range name {
			if r > 0x7f || r <= ' ' || strings.ContainsRune(`/\:*?"<>|`, r) {
				t.Fatalf("accepted %q with %q", name, r)
			}
		}
		if p, err := SessionPath("/base", name); err != nil || filepath.Dir(p) != "/base" {
			t.Fatalf("SessionPath(%q) = %q, %v", name, p, err)
		}
	})
}
