package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestLogFileThatIsNotARegularFile: a log file that is a device is written in place
// (/dev/null stays the device), a FIFO nobody reads is an error at once rather than a
// wait, and a symbolic link is refused with its target left as it was.
func TestLogFileThatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	_, closeFn, err := New(Config{File: os.DevNull, Quiet: true}, nil)
	if err != nil {
		t.Fatalf("--log-file /dev/null: %v", err)
	}
	closeFn()
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v %v", st.Mode(), err)
	}

	fifo := filepath.Join(dir, "log.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := New(Config{File: fifo, Quiet: true}, nil); err == nil || !strings.Contains(err.Error(), "is a FIFO that nobody reads") {
		t.Errorf("a FIFO without a reader: %v", err)
	}

	target := filepath.Join(dir, "kept.txt")
	if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "agent.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := New(Config{File: link, Quiet: true}, nil); err == nil || !strings.Contains(err.Error(), link+" is a symbolic link, not a regular file") {
		t.Errorf("a symbolic link: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "kept" {
		t.Errorf("the link's target holds %q", b)
	}
}
