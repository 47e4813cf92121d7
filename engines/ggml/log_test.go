package ggml

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestLogLines: the pieces a ggml log callback gets become whole lines at the level of
// the message they belong to.
func TestLogLines(t *testing.T) {
	var got []string
	l := NewLogLines(func(level LogLevel, line string) { got = append(got, fmt.Sprintf("%s: %s", level, line)) })
	l.Write(LogInfo, "llama_model_load: loading")
	l.Write(logCont, ".")
	l.Write(logCont, ".")
	l.Write(logCont, " done\n")
	l.Write(LogError, "graph_compute: ggml_backend_sched_graph_compute_async failed with error -1\nllama_decode: failed to decode, ret = 2\n")
	l.Write(LogWarn, "no newline")
	l.Write(LogDebug, "\n")
	// A line longer than maxLogLine is not held back for its newline.
	l.Write(LogInfo, strings.Repeat("x", maxLogLine+10))
	want := []string{
		"info: llama_model_load: loading.. done",
		"error: graph_compute: ggml_backend_sched_graph_compute_async failed with error -1",
		"error: llama_decode: failed to decode, ret = 2",
		"warn: no newline",
		"info: " + strings.Repeat("x", maxLogLine+10),
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%.300q\nwant\n%.300q", got, want)
	}
}
