// The C half of SetLogger: libwhisper calls parley_whisper_log on any thread (its own
// threads included); lines below the threshold are dropped here, without a call into Go.
#include <whisper.h>
#include "_cgo_export.h"

// The threshold is process-wide, like the logger it filters.
static int parley_whisper_log_min = GGML_LOG_LEVEL_CONT + 1;

static void parley_whisper_log(enum ggml_log_level level, const char *text, void *user_data) {
	(void)user_data;
	// GGML_LOG_LEVEL_CONT continues the previous line; libwhisper uses it only for
	// progress dots, which are never wanted.
	if (level == GGML_LOG_LEVEL_CONT || (int)level < __atomic_load_n(&parley_whisper_log_min, __ATOMIC_RELAXED)) {
		return;
	}
	parleyWhisperLog((int)level, (char *)text);
}

void parley_whisper_log_route(int min) {
	__atomic_store_n(&parley_whisper_log_min, min, __ATOMIC_RELAXED);
	whisper_log_set(parley_whisper_log, NULL);
}
