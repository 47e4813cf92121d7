package whisper

/*
void parley_whisper_log_route(int min);
*/
import "C"

import (
	"sync/atomic"

	"github.com/parley-voice/parley/engines/ggml"
)

// LogLevel is the severity of a libwhisper log line (ggml's levels).
type LogLevel = ggml.LogLevel

// Log levels, from everything to nothing.
const (
	LogDebug = ggml.LogDebug
	LogInfo  = ggml.LogInfo
	LogWarn  = ggml.LogWarn
	LogError = ggml.LogError
	LogNone  = ggml.LogNone
)

// whisperLog is where libwhisper's log lines go (nil: nowhere). It is package state
// because the library's logger is process-wide and the C callback it calls has no other
// way to reach Go; SetLogger is its only writer.
var whisperLog atomic.Pointer[ggml.LogLines]

//export parleyWhisperLog
func parleyWhisperLog(level C.int, text *C.char) {
	if l := whisperLog.Load(); l != nil {
		l.Write(LogLevel(level), C.GoString(text))
	}
}

// SetLogger sends libwhisper's log lines at or above min to f, a whole line at a time;
// a nil f or LogNone drops them all. libwhisper writes to stderr by default, several
// info lines per VAD call and per decode, which floods a streaming agent's console.
// Progress dots (continuations) are always dropped. Lines below min are dropped in C,
// without a call into Go.
//
// libwhisper points ggml's logger at the same callback, so call ggml.SetLogger after
// this to give ggml's own lines their own destination. The setting is process-wide, as
// the library's logger is.
func SetLogger(min LogLevel, f ggml.LogFunc) {
	if f == nil {
		min = LogNone
		whisperLog.Store(nil)
	} else {
		whisperLog.Store(ggml.NewLogLines(f))
	}
	C.parley_whisper_log_route(C.int(min))
}
