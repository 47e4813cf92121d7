// Small C helpers for the Go binding. They exist where Go cannot do the job itself: C
// callbacks (aborting a decode) and building a llama_batch that points at Go
// memory only for the duration of one call.
#ifndef PARLEY_LLAMA_SHIM_H
#define PARLEY_LLAMA_SHIM_H

#include <llama.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// parley_abort lets Go stop a running llama_decode from another goroutine. Each decode
// gets a fresh ticket in 'current'; a cancellation stores its decode's ticket in
// 'requested'. A late cancellation of an earlier decode therefore never aborts a later one.
typedef struct {
	int64_t current;
	int64_t requested;
} parley_abort;

static inline bool parley_abort_cb(void *data) {
	parley_abort *a = (parley_abort *)data;
	int64_t cur = __atomic_load_n(&a->current, __ATOMIC_ACQUIRE);
	return cur != 0 && __atomic_load_n(&a->requested, __ATOMIC_ACQUIRE) == cur;
}

static inline void parley_abort_install(struct llama_context *ctx, parley_abort *a) {
	llama_set_abort_callback(ctx, parley_abort_cb, a);
}

static inline void parley_abort_begin(parley_abort *a, int64_t ticket) {
	__atomic_store_n(&a->current, ticket, __ATOMIC_RELEASE);
}

static inline void parley_abort_request(parley_abort *a, int64_t ticket) {
	__atomic_store_n(&a->requested, ticket, __ATOMIC_RELEASE);
}

// parley_argmax returns the most likely token of output idx, or LLAMA_TOKEN_NULL when the
// last decode has no such output. It is greedy sampling without llama_sampler_sample's
// candidate array, which costs a copy of the whole vocabulary per token. Ties go to the
// lowest id, as llama.cpp's greedy sampler does.
static inline llama_token parley_argmax(struct llama_context *ctx, int32_t idx, int32_t n_vocab) {
	const float *logits = llama_get_logits_ith(ctx, idx);
	if (logits == NULL || n_vocab <= 0) return LLAMA_TOKEN_NULL;
	llama_token best = 0;
	float max = logits[0];
	for (int32_t i = 1; i < n_vocab; i++) {
		if (logits[i] > max) {
			max = logits[i];
			best = i;
		}
	}
	return best;
}

// The CPU backend is a loadable module, so its threadpool functions are reached through
// the backend registry, as llama.cpp's own tools do. Without an attached threadpool ggml
// starts and joins its worker threads for every decode, which makes multi-threaded
// token-by-token generation several times slower.
typedef struct ggml_threadpool *(*parley_threadpool_new_fn)(struct ggml_threadpool_params *);
typedef void (*parley_threadpool_free_fn)(struct ggml_threadpool *);

static inline void *parley_cpu_proc(const char *name) {
	ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	if (dev == NULL) return NULL;
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
	if (reg == NULL) return NULL;
	return ggml_backend_reg_get_proc_address(reg, name);
}

static inline struct ggml_threadpool *parley_threadpool_new(int n_threads) {
	parley_threadpool_new_fn fn = (parley_threadpool_new_fn)parley_cpu_proc("ggml_threadpool_new");
	if (fn == NULL) return NULL;
	struct ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
	return fn(&p);
}

static inline void parley_threadpool_free(struct ggml_threadpool *tp) {
	if (tp == NULL) return;
	parley_threadpool_free_fn fn = (parley_threadpool_free_fn)parley_cpu_proc("ggml_threadpool_free");
	if (fn != NULL) fn(tp);
}

#endif
