//go:build linux

// C side of package pulse: libpulse's callbacks, forwarded to the Go collectors that the
// user data (a runtime/cgo.Handle) names. Stateless glue.
#include <stdint.h>
#include <pulse/pulseaudio.h>

#include "_cgo_export.h"

static void sink_cb(pa_context *c, const pa_sink_info *i, int eol, void *user) {
	parleyPulseSink((uintptr_t)user, (pa_sink_info *)i, eol);
}

static void source_cb(pa_context *c, const pa_source_info *i, int eol, void *user) {
	parleyPulseSource((uintptr_t)user, (pa_source_info *)i, eol);
}

static void server_cb(pa_context *c, const pa_server_info *i, void *user) {
	parleyPulseServer((uintptr_t)user, (pa_server_info *)i);
}

pa_operation *parley_pulse_sinks(pa_context *c, uintptr_t handle) {
	return pa_context_get_sink_info_list(c, sink_cb, (void *)handle);
}

pa_operation *parley_pulse_sources(pa_context *c, uintptr_t handle) {
	return pa_context_get_source_info_list(c, source_cb, (void *)handle);
}

pa_operation *parley_pulse_server(pa_context *c, uintptr_t handle) {
	return pa_context_get_server_info(c, server_cb, (void *)handle);
}
