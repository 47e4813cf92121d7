// C side of package device: the PortAudio callback trampolines and the silencing of
// ALSA's and JACK's diagnostics. Everything here is stateless glue.
#include <portaudio.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "_cgo_export.h" // parleyStreamCallback and parleyStreamFinished, implemented in Go
#include "device.h"

// parley_stream_cb adapts PortAudio's callback to the Go one: the user data is a
// runtime/cgo.Handle, so no Go pointer is ever stored in C memory.
static int parley_stream_cb(const void *in, void *out, unsigned long frames,
		const PaStreamCallbackTimeInfo *ti, PaStreamCallbackFlags flags, void *user) {
	return parleyStreamCallback((void *)in, out, frames, ti->inputBufferAdcTime, ti->currentTime,
		ti->outputBufferDacTime, flags, (uintptr_t)user);
}

static void parley_stream_finished(void *user) {
	parleyStreamFinished((uintptr_t)user);
}

// parley_open_stream opens a callback stream whose callbacks reach the Go stream that
// handle names, and registers the finished callback (which PortAudio also calls when a
// host error ends the stream, for example when the sound server goes away).
PaError parley_open_stream(PaStream **s, const PaStreamParameters *in, const PaStreamParameters *out,
		double rate, unsigned long frames, PaStreamFlags flags, uintptr_t handle) {
	PaError err = Pa_OpenStream(s, in, out, rate, frames, flags, parley_stream_cb, (void *)handle);
	if (err != paNoError) {
		return err;
	}
	err = Pa_SetStreamFinishedCallback(*s, parley_stream_finished);
	if (err != paNoError) {
		Pa_CloseStream(*s);
		*s = NULL;
	}
	return err;
}

const char *parley_host_error_text(void) {
	const PaHostErrorInfo *info = Pa_GetLastHostErrorInfo();
	return info && info->errorText ? info->errorText : "";
}

long parley_host_error_code(void) {
	const PaHostErrorInfo *info = Pa_GetLastHostErrorInfo();
	return info ? info->errorCode : 0;
}

#ifdef __linux__
#include <dlfcn.h>

// parley_alsa_realtime asks PortAudio's ALSA host API to run the stream's callback
// thread with SCHED_FIFO priority (silently left at normal priority where the process may
// not do that). The caller checks that the stream is an ALSA one: the function takes any
// PaStream but only works on ALSA streams. Found at run time because only Linux builds
// of PortAudio have it.
int parley_alsa_realtime(PaStream *s, int enable) {
	void (*fn)(PaStream *, int) = (void (*)(PaStream *, int))dlsym(RTLD_DEFAULT, "PaAlsa_EnableRealtimeScheduling");
	if (!fn) {
		return 0;
	}
	fn(s, enable);
	return 1;
}

// ALSA and JACK print their probing diagnostics straight to stderr from C. PortAudio
// links both libraries on Linux, so their handler setters are found in the global
// scope without a build-time dependency on either; a library that is absent is simply
// not silenced. Nothing here is Go state: the handlers are process-wide C settings.
static void parley_alsa_error_silent(const char *file, int line, const char *function, int err, const char *fmt, ...) {}
static void parley_alsa_log_silent(int prio, int iface, const char *file, int line, const char *function, int err, const char *fmt, va_list arg) {}
static void parley_jack_silent(const char *msg) {}

typedef void (*parley_alsa_error_fn)(const char *, int, const char *, int, const char *, ...);
typedef void (*parley_alsa_log_fn)(int, int, const char *, int, const char *, int, const char *, va_list);
typedef void (*parley_jack_msg_fn)(const char *);

// parley_quiet_native silences (quiet != 0) or restores (quiet == 0) ALSA's messages and
// silences JACK's (JACK has no public way back to its default printer). It returns a bit
// set of what it found: 1 ALSA error handler, 2 ALSA log handler, 4 JACK.
int parley_quiet_native(int quiet) {
	int found = 0;
	int (*set_alsa_error)(parley_alsa_error_fn) = (int (*)(parley_alsa_error_fn))dlsym(RTLD_DEFAULT, "snd_lib_error_set_handler");
	if (set_alsa_error) {
		set_alsa_error(quiet ? parley_alsa_error_silent : NULL);
		found |= 1;
	}
	parley_alsa_log_fn (*set_alsa_log)(parley_alsa_log_fn) = (parley_alsa_log_fn (*)(parley_alsa_log_fn))dlsym(RTLD_DEFAULT, "snd_lib_log_set_handler");
	if (set_alsa_log) {
		set_alsa_log(quiet ? parley_alsa_log_silent : NULL);
		found |= 2;
	}
	void (*set_jack_error)(parley_jack_msg_fn) = (void (*)(parley_jack_msg_fn))dlsym(RTLD_DEFAULT, "jack_set_error_function");
	void (*set_jack_info)(parley_jack_msg_fn) = (void (*)(parley_jack_msg_fn))dlsym(RTLD_DEFAULT, "jack_set_info_function");
	if (set_jack_error && set_jack_info) {
		if (quiet) {
			set_jack_error(parley_jack_silent);
			set_jack_info(parley_jack_silent);
		}
		found |= 4;
	}
	return found;
}
#else
int parley_quiet_native(int quiet) { return 0; }
int parley_alsa_realtime(PaStream *s, int enable) { return 0; }
#endif
