package whisper

/*
#include <stdio.h>
#include <whisper.h>

// The threshold lives on the C side because libwhisper calls the callback from its own
// threads; an int read there needs no Go runtime.
static int parley_whisper_min_level = GGML_LOG_LEVEL_WARN;

static void parley_whisper_log(enum ggml_log_level level, const char *text, void *user_data) {
	(void)user_data;
	// GGML_LOG_LEVEL_CONT continues the previous line at that line's level; libwhisper
	// uses it only for progress dots, which are never wanted.
	if (level == GGML_LOG_LEVEL_CONT || (int)level < parley_whisper_min_level) {
		return;
	}
	fputs(text, stderr);
}

static void parley_whisper_set_log_level(int level) {
	__atomic_store_n(&parley_whisper_min_level, level, __ATOMIC_RELAXED);
	whisper_log_set(parley_whisper_log, NULL);
}
*/
import "C"

// LogLevel is the least severe libwhisper (and ggml) message that reaches stderr.
type LogLevel int

// Log levels, from ggml_log_level.
const (
	LogDebug LogLevel = C.GGML_LOG_LEVEL_DEBUG
	LogInfo  LogLevel = C.GGML_LOG_LEVEL_INFO
	LogWarn  LogLevel = C.GGML_LOG_LEVEL_WARN
	LogError LogLevel = C.GGML_LOG_LEVEL_ERROR
	// LogNone silences libwhisper completely.
	LogNone LogLevel = C.GGML_LOG_LEVEL_ERROR + 100
)

// SetLogLevel routes libwhisper's log lines through a filter that drops those below l.
// libwhisper logs several INFO lines per VAD call and per decode by default, which floods
// the console of a streaming agent; commands and tests set LogWarn or LogError. The
// setting is process-wide because libwhisper's logger is.
func SetLogLevel(l LogLevel) { C.parley_whisper_set_log_level(C.int(l)) }
