package portaudio

/*
#cgo pkg-config: portaudio-2.0
#cgo linux LDFLAGS: -ldl
#include "device.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
)

// paLock serialises every call that touches PortAudio's process-wide state (its
// initialisation count and device tables), which PortAudio does not protect: Pa_Initialize,
// Pa_Terminate, device and host-API queries, and opening and closing streams. It is the
// one piece of package-level state, and it exists only because the C library itself is a
// process-wide singleton; everything Go-side lives in Host and Stream values. It is a
// channel rather than a mutex so that a caller can stop waiting for it: a call the audio
// system never returns from (a device scan while the sound server is frozen) holds it for
// good.
var paLock = make(chan struct{}, 1)

// lockPA takes paLock, waiting at most wait; after that it fails with ErrStuck.
func lockPA(wait time.Duration) error {
	select {
	case paLock <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case paLock <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("%w: PortAudio is still busy with a call after %v", ErrStuck, wait)
	}
}

func unlockPA() { <-paLock }

// lockWait bounds how long a PortAudio call waits for another one to finish.
const lockWait = 3 * time.Second

// Version returns PortAudio's version text.
func Version() string { return C.GoString(C.Pa_GetVersionText()) }

// Error is a PortAudio error code, with the host API's own message when PortAudio
// reports an unanticipated host error.
type Error struct {
	Code int
	// HostCode and HostText come from the host API (ALSA, CoreAudio, ...) for
	// paUnanticipatedHostError.
	HostCode int
	HostText string
}

func (e *Error) Error() string {
	msg := C.GoString(C.Pa_GetErrorText(C.PaError(e.Code)))
	if e.HostText != "" {
		return fmt.Sprintf("portaudio: %s: %s (host error %d)", msg, e.HostText, e.HostCode)
	}
	return "portaudio: " + msg
}

// Is lets errors.Is match the sentinel errors of this package.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrDeviceUnavailable:
		return e.Code == int(C.paDeviceUnavailable)
	case ErrInvalidDevice:
		return e.Code == int(C.paInvalidDevice)
	case ErrUnsupportedFormat:
		switch C.PaError(e.Code) {
		case C.paInvalidChannelCount, C.paInvalidSampleRate, C.paSampleFormatNotSupported:
			return true
		}
	}
	return false
}

var (
	// ErrDeviceUnavailable means the device exists but cannot be opened now (busy, or
	// its server is gone).
	ErrDeviceUnavailable = errors.New("audio device unavailable")
	// ErrInvalidDevice means PortAudio does not know the device (any more).
	ErrInvalidDevice = errors.New("invalid audio device")
	// ErrUnsupportedFormat means the device rejected the channel count, rate or format.
	ErrUnsupportedFormat = errors.New("audio format not supported by the device")
)

// paError converts a PortAudio result into an error (nil for paNoError). Call it right
// after the failing call, under paLock, so that the host error info is the right one.
func paError(code C.PaError) error {
	if code >= 0 {
		return nil
	}
	e := &Error{Code: int(code)}
	if code == C.paUnanticipatedHostError {
		e.HostCode = int(C.parley_host_error_code())
		e.HostText = C.GoString(C.parley_host_error_text())
	}
	return e
}

// quietNative silences (or, with quiet false, restores) ALSA's and JACK's stderr
// messages. Call it with paLock held, before PortAudio probes devices.
func quietNative(quiet bool) {
	q := C.int(0)
	if quiet {
		q = 1
	}
	C.parley_quiet_native(q)
}

func seconds(t C.PaTime) time.Duration { return time.Duration(float64(t) * float64(time.Second)) }
