package source

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
)

// noSharedAssets makes the shared test assets unfindable: PARLEY_SHARED unset and a
// working directory outside any checkout.
func noSharedAssets(t *testing.T) {
	t.Setenv("PARLEY_SHARED", "")
	t.Chdir(t.TempDir())
}

// TestRecordingSaysWithoutSharedAssets: where the shared test assets are not, a
// recording in them that says its words is absent (to be synthesised), and one that
// does not is an error that says how to fix it.
func TestRecordingSaysWithoutSharedAssets(t *testing.T) {
	noSharedAssets(t)
	sc, err := ParseScenario([]byte("recordings:\n  - file: ${PARLEY_SHARED}/audio/q.wav\n    says: '  what time is it '\n    at: 0.5\n"), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if r := sc.Recordings[0]; r.File != "" || r.Says != "what time is it" || r.Name != "q.wav" {
		t.Errorf("recording %+v, want no file, its words and its file's name", r)
	}
	for _, data := range []string{
		"recordings:\n  - file: ${PARLEY_SHARED}/audio/q.wav\n",
		"recordings:\n  - file: ${PARLEY_SHARED}/audio/q.wav\n    says: '  '\n",
	} {
		_, err := ParseScenario([]byte(data), "/base")
		if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), "PARLEY_SHARED") || !strings.Contains(err.Error(), "says:") {
			t.Errorf("%s: %v, want an invalid scenario that names PARLEY_SHARED and says:", data, err)
		}
	}
	if _, err := ParseScenario([]byte("recordings: [{file: $NOT_SET_ANYWHERE/q.wav, says: hello}]"), "/base"); err == nil || !strings.Contains(err.Error(), "NOT_SET_ANYWHERE") {
		t.Errorf("an unset variable other than the shared folder's: %v", err)
	}
}

// TestLoadScenarioAbsentRecording: a recording whose file does not exist is absent when
// it says its words, and an error when it does not; a recording that is there keeps
// its file.
func TestLoadScenarioAbsentRecording(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "present.wav")
	if err := audio.WriteWAVFile(present, audio.Frame{Samples: make([]float32, 1600), Rate: 16000, Channels: 1}, 16); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sc, err := LoadScenario(write("ok.yaml", "recordings:\n  - file: gone.wav\n    says: go forward\n  - file: present.wav\n    says: nothing\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := sc.Recordings[0]; r.File != "" || r.Says != "go forward" {
		t.Errorf("absent recording %+v", r)
	}
	if r := sc.Recordings[1]; r.File != present {
		t.Errorf("present recording %+v, want its file", r)
	}
	if _, err := LoadScenario(write("bad.yaml", "recordings:\n  - file: gone.wav\n")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent recording without words: %v", err)
	}
	_, err = NewScenario("s", sc, Config{})
	if err == nil || !strings.Contains(err.Error(), "go forward") || !strings.Contains(err.Error(), "gone.wav") {
		t.Errorf("a source of a scenario with an absent recording: %v, want an error naming it and its words", err)
	}
}

// TestShippedScenariosSayTheirTranscripts: what a shipped scenario says a shared
// recording says is that recording's transcript (shared/audio/transcripts.tsv), so that
// a clone without the recordings replays the same words.
func TestShippedScenariosSayTheirTranscripts(t *testing.T) {
	tsv, err := os.ReadFile(testenv.SharedFile(t, "audio/transcripts.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	transcripts := map[string]string{}
	for _, line := range strings.Split(string(tsv), "\n") {
		if f := strings.Split(line, "\t"); len(f) >= 2 {
			transcripts[f[0]] = strings.ToLower(strings.TrimSpace(f[1]))
		}
	}
	t.Setenv("PARLEY_SHARED", testenv.SharedDir(t))
	scenarios, err := filepath.Glob(filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	said := 0
	for _, path := range scenarios {
		sc, err := LoadScenario(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sc.Recordings {
			if r.Says == "" {
				continue
			}
			said++
			want, ok := transcripts[filepath.Base(r.File)]
			if !ok {
				t.Errorf("%s line %d: %s has no transcript", filepath.Base(path), r.Line, r.File)
				continue
			}
			if r.Says != want {
				t.Errorf("%s line %d: says %q, the transcript of %s is %q", filepath.Base(path), r.Line, r.Says, filepath.Base(r.File), want)
			}
		}
	}
	if said == 0 {
		t.Error("no shipped scenario says what its recordings say")
	}
}
