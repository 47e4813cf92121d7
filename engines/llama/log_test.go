package llama

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// captureStderr runs f with the process's file descriptor 2 (where C libraries write)
// redirected, and returns what was written there.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(w.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	done := make(chan struct{})
	go func() { io.Copy(&out, r); close(done) }()
	defer func() {
		syscall.Dup2(saved, 2)
		syscall.Close(saved)
		w.Close()
		<-done
		r.Close()
	}()
	f()
	return out.String()
}

// TestLoggerGetsLibraryLines: with a logger set, llama.cpp's lines (a model load's at info
// level, an aborted decode's at error level) reach it as whole lines, and none reaches
// stderr; with none set, they are dropped.
func TestLoggerGetsLibraryLines(t *testing.T) {
	type line struct {
		level LogLevel
		text  string
	}
	var mu sync.Mutex
	var lines []line
	defer SetLogger(LogNone, nil)
	var aborted int
	stderr := captureStderr(t, func() {
		SetLogger(LogInfo, func(level LogLevel, text string) {
			mu.Lock()
			lines = append(lines, line{level, text})
			mu.Unlock()
		})
		m := storiesModel(t)
		c := newContext(t, m, ContextParams{NCtx: 512, Threads: 1})
		toks, _ := m.Tokenize(strings.Repeat("The cat sat on the mat. ", 60), true, false)
		toks = toks[:500]
		for i := 0; i < 50 && aborted < 3; i++ {
			if err := c.Clear(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i*100)*time.Microsecond)
			if err := c.DecodeTokens(ctx, 0, 0, toks); errors.Is(err, ErrAborted) {
				aborted++
			}
			cancel()
		}
	})
	if stderr != "" {
		t.Errorf("llama.cpp wrote to stderr with a logger set:\n%s", stderr)
	}
	if aborted == 0 {
		t.Fatal("no decode was aborted")
	}
	mu.Lock()
	defer mu.Unlock()
	var info, decodeFailed bool
	for _, l := range lines {
		if strings.Contains(l.text, "\n") || l.text == "" {
			t.Errorf("not one whole line: %q", l.text)
		}
		if l.level < LogInfo {
			t.Errorf("a line below the logger's level: %v %q", l.level, l.text)
		}
		info = info || (l.level == LogInfo && strings.Contains(l.text, "llama_model_loader"))
		decodeFailed = decodeFailed || (l.level == LogError && strings.Contains(l.text, "failed to decode"))
	}
	if !info || !decodeFailed {
		t.Errorf("the logger did not get the model load's info lines (%v) and an aborted decode's error (%v); it got %d lines", info, decodeFailed, len(lines))
	}

	// Without a logger nothing reaches stderr either.
	SetLogger(LogNone, nil)
	stderr = captureStderr(t, func() {
		m := storiesModel(t)
		m.Close()
	})
	if stderr != "" {
		t.Errorf("llama.cpp wrote to stderr without a logger:\n%s", stderr)
	}
}
