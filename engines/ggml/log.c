// The C half of SetLogger: ggml's logger calls parley_ggml_log on any thread; lines below
// the threshold are dropped here, without a call into Go.
#include <ggml.h>
#include "_cgo_export.h"

// The threshold is process-wide, like the logger it filters.
static int parley_ggml_log_min = GGML_LOG_LEVEL_CONT + 1;

static void parley_ggml_log(enum ggml_log_level level, const char *text, void *user_data) {
	(void)user_data;
	int min = __atomic_load_n(&parley_ggml_log_min, __ATOMIC_RELAXED);
	if (level == GGML_LOG_LEVEL_CONT) {
		// Continuations (progress dots, the rest of a line) belong to an info message.
		if (min > GGML_LOG_LEVEL_INFO) return;
	} else if ((int)level < min) {
		return;
	}
	parleyGgmlLog((int)level, (char *)text);
}

void parley_ggml_log_route(int min) {
	__atomic_store_n(&parley_ggml_log_min, min, __ATOMIC_RELAXED);
	ggml_log_set(parley_ggml_log, NULL);
}
