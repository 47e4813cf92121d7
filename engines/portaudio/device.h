// Declarations shared by the Go files of package device and device.c.
#ifndef PARLEY_DEVICE_H
#define PARLEY_DEVICE_H
#include <portaudio.h>
#include <stdint.h>

PaError parley_open_stream(PaStream **s, const PaStreamParameters *in, const PaStreamParameters *out,
	double rate, unsigned long frames, PaStreamFlags flags, uintptr_t handle);
const char *parley_host_error_text(void);
long parley_host_error_code(void);
int parley_quiet_native(int quiet);
int parley_alsa_realtime(PaStream *s, int enable);
#endif
