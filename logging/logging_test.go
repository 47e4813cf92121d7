package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestModuleLevels(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		logger   string
		debugOut bool
		infoOut  bool
	}{
		{"default info hides debug", Config{}, "asr", false, true},
		{"module override to debug", Config{Modules: map[string]string{"asr": "debug"}}, "asr", true, true},
		{"override covers children", Config{Modules: map[string]string{"asr": "debug"}}, "asr.whisper", true, true},
		{"override does not leak to siblings", Config{Modules: map[string]string{"asr": "debug"}}, "asrx", false, true},
		{"module quieter than default", Config{Level: "debug", Modules: map[string]string{"llm": "warn"}}, "llm", false, false},
		{"most specific wins", Config{Modules: map[string]string{"asr": "warn", "asr.whisper": "debug"}}, "asr.whisper", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var console bytes.Buffer
			log, closeFn, err := New(tt.cfg, &console)
			if err != nil {
				t.Fatal(err)
			}
			l := log
			for _, part := range strings.Split(tt.logger, ".") {
				l = l.Named(part)
			}
			l.Debug("debug-line")
			l.Info("info-line")
			if err := closeFn(); err != nil {
				t.Fatal(err)
			}
			out := console.String()
			if got := strings.Contains(out, "debug-line"); got != tt.debugOut {
				t.Errorf("debug shown = %v, want %v\n%s", got, tt.debugOut, out)
			}
			if got := strings.Contains(out, "info-line"); got != tt.infoOut {
				t.Errorf("info shown = %v, want %v\n%s", got, tt.infoOut, out)
			}
		})
	}
}

func TestFileGetsJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "agent.jsonl")
	var console bytes.Buffer
	log, closeFn, err := New(Config{File: path, Quiet: true}, &console)
	if err != nil {
		t.Fatal(err)
	}
	log.Named("vad").Info("speech started", zap.String("at", "1.2s"))
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	if console.Len() != 0 {
		t.Errorf("quiet console got %q", console.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(data), &entry); err != nil {
		t.Fatalf("log file line is not JSON: %v\n%s", err, data)
	}
	if entry["logger"] != "vad" || entry["msg"] != "speech started" || entry["at"] != "1.2s" {
		t.Errorf("entry = %v", entry)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %v, want 0600", st.Mode().Perm())
	}
}

func TestBadLevels(t *testing.T) {
	for _, s := range []string{"asr", "=debug", "asr=loud"} {
		if _, err := ParseModuleLevels(s); err == nil {
			t.Errorf("ParseModuleLevels(%q): want error", s)
		}
	}
	if _, _, err := New(Config{Level: "chatty"}, nil); err == nil {
		t.Error("New with a bad level: want error")
	}
	got, err := ParseModuleLevels(" asr=debug , llm=warn ")
	if err != nil || got["asr"] != "debug" || got["llm"] != "warn" {
		t.Errorf("ParseModuleLevels = %v, %v", got, err)
	}
}
