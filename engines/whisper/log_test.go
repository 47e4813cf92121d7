package whisper

import (
	"strings"
	"sync"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestLoggerGetsLibraryLines: with a logger set, libwhisper's lines (loading the VAD
// model) reach it as whole lines at or above its level; with none set, none do.
func TestLoggerGetsLibraryLines(t *testing.T) {
	loadBackends(t)
	defer SetLogger(LogNone, nil)
	var mu sync.Mutex
	var lines []string
	SetLogger(LogInfo, func(level LogLevel, text string) {
		mu.Lock()
		defer mu.Unlock()
		if level < LogInfo || strings.Contains(text, "\n") {
			t.Errorf("line %q at %v", text, level)
		}
		lines = append(lines, text)
	})
	v, err := NewVAD(testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin"), VADParams{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	mu.Lock()
	n := len(lines)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no line of libwhisper's reached the logger")
	}
	SetLogger(LogNone, nil)
	if v, err = NewVAD(testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin"), VADParams{}); err != nil {
		t.Fatal(err)
	}
	v.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != n {
		t.Errorf("lines reached a detached logger: %q", lines[n:])
	}
}
