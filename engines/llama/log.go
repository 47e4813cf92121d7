package llama

/*
#include <stdint.h>

void parley_llama_log_route(int min);
*/
import "C"

import (
	"sync/atomic"

	"github.com/parley-voice/parley/engines/ggml"
)

// LogLevel is the severity of a llama.cpp log line (ggml's levels).
type LogLevel = ggml.LogLevel

// Log levels, from everything to nothing.
const (
	LogDebug = ggml.LogDebug
	LogInfo  = ggml.LogInfo
	LogWarn  = ggml.LogWarn
	LogError = ggml.LogError
	LogNone  = ggml.LogNone
)

// llamaLog is where llama.cpp's log lines go (nil: nowhere). It is package state because
// the library's logger is process-wide and the C callback it calls has no other way to
// reach Go; SetLogger is its only writer.
var llamaLog atomic.Pointer[ggml.LogLines]

//export parleyLlamaLog
func parleyLlamaLog(level C.int, text *C.char) {
	if l := llamaLog.Load(); l != nil {
		l.Write(LogLevel(level), C.GoString(text))
	}
}

// SetLogger sends llama.cpp's log lines at or above min to f, a whole line at a time; a
// nil f or LogNone drops them all. llama.cpp writes to stderr by default: every tensor
// and graph detail at info level, and an error line for every decode that is aborted
// ("llama_decode: failed to decode"), which a voice agent does whenever it drops a
// prepared reply. Lines below min are dropped in C, without a call into Go.
//
// llama.cpp points ggml's logger at the same callback, so call ggml.SetLogger after this
// to give ggml's own lines their own destination. The setting is process-wide, as the
// library's logger is.
func SetLogger(min LogLevel, f ggml.LogFunc) {
	if f == nil {
		min = LogNone
		llamaLog.Store(nil)
	} else {
		llamaLog.Store(ggml.NewLogLines(f))
	}
	C.parley_llama_log_route(C.int(min))
}
