package ggml

/*
#include <ggml.h>

void parley_ggml_log_route(int min);
*/
import "C"

import (
	"strings"
	"sync"
	"sync/atomic"
)

// LogLevel is the severity of a line of ggml's log callback, which llama.cpp and
// whisper.cpp use for their own logs too.
type LogLevel int

// Log levels, from ggml_log_level, and LogNone, above them all.
const (
	LogDebug LogLevel = C.GGML_LOG_LEVEL_DEBUG
	LogInfo  LogLevel = C.GGML_LOG_LEVEL_INFO
	LogWarn  LogLevel = C.GGML_LOG_LEVEL_WARN
	LogError LogLevel = C.GGML_LOG_LEVEL_ERROR
	// logCont continues the previous piece at its level (progress dots, the rest of a
	// line); LogLines folds it into that line.
	logCont LogLevel = C.GGML_LOG_LEVEL_CONT
	// LogNone is above every level: nothing passes.
	LogNone LogLevel = logCont + 1
)

func (l LogLevel) String() string {
	switch l {
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	}
	return "unknown"
}

// LogFunc receives one whole line of a native library's log, without its newline. It is
// called from whichever thread the library logs on, so it must be safe for concurrent
// use and must not call back into the library.
type LogFunc func(level LogLevel, line string)

// maxLogLine bounds a line held while it waits for its newline.
const maxLogLine = 4096

// LogLines assembles the pieces a ggml-style log callback receives (a message may come in
// several calls, and GGML_LOG_LEVEL_CONT continues the previous one) into whole lines
// for a LogFunc. It is safe for concurrent use.
type LogLines struct {
	f     LogFunc
	mu    sync.Mutex
	level LogLevel
	buf   strings.Builder
}

// NewLogLines returns an assembler that hands each complete line to f.
func NewLogLines(f LogFunc) *LogLines { return &LogLines{f: f} }

// Write takes one piece of text as the library's callback received it.
func (l *LogLines) Write(level LogLevel, text string) {
	type line struct {
		level LogLevel
		text  string
	}
	var lines []line
	l.mu.Lock()
	end := func() {
		if s := strings.TrimRight(l.buf.String(), " \r\t"); strings.TrimSpace(s) != "" {
			lines = append(lines, line{l.level, s})
		}
		l.buf.Reset()
	}
	if level != logCont {
		// A new message: a piece still waiting for its newline was a whole line.
		end()
		l.level = level
	}
	for text != "" {
		piece, rest, complete := strings.Cut(text, "\n")
		l.buf.WriteString(piece)
		text = rest
		if complete || l.buf.Len() >= maxLogLine {
			end()
		}
	}
	l.mu.Unlock()
	// Outside the lock: f may take its time (a logger writing to a file).
	for _, ln := range lines {
		l.f(ln.level, ln.text)
	}
}

// ggmlLog is where ggml's own log lines go (nil: nowhere). It is package state because
// the library's logger it stands for is process-wide: the C callback ggml calls has no
// other way to reach Go. SetLogger is the only writer.
var ggmlLog atomic.Pointer[LogLines]

//export parleyGgmlLog
func parleyGgmlLog(level C.int, text *C.char) {
	if l := ggmlLog.Load(); l != nil {
		l.Write(LogLevel(level), C.GoString(text))
	}
}

// SetLogger sends ggml's own log lines at or above min (the backend loader's, the
// scheduler's) to f, a whole line at a time; a nil f or LogNone drops them all. ggml's
// default logger writes to stderr, which breaks a console's lines, so programs set one
// at their start. llama.SetLogger and whisper.SetLogger point ggml's logger at their
// own, so call this one after them. The setting is process-wide, as the library's
// logger is.
func SetLogger(min LogLevel, f LogFunc) {
	if f == nil {
		min = LogNone
		ggmlLog.Store(nil)
	} else {
		ggmlLog.Store(NewLogLines(f))
	}
	C.parley_ggml_log_route(C.int(min))
}
