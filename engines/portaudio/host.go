// Package portaudio is Parley's PortAudio plumbing, shared by the microphone and speaker
// modules and the command line: opening PortAudio (Host), listing host APIs and devices,
// choosing a device by name, substring or index, and callback-driven float32 streams.
//
// Names survive reboots and re-plugging, indices do not: configurations should name
// devices, and the index form exists for quick experiments with 'agent devices'.
//
// On PulseAudio and PipeWire, PortAudio 19.7 (which has no PulseAudio host API) sees only
// ALSA's "pulse" and "default" devices. A configuration may therefore also name one of the
// sound server's sources or sinks, by name or description ("USB Mic"): Find asks the
// server (engines/pulse), picks the "pulse" device and marks it with the server's device,
// and opening a stream on it sets PULSE_SOURCE or PULSE_SINK for the moment the stream
// opens, which is when ALSA's pulse plugin connects and libpulse reads them.
//
// On Linux, PortAudio's probing makes ALSA and JACK print pages of diagnostics about
// devices that do not exist (HDMI, modem, a JACK server nobody runs). Open silences
// them by installing silent handlers in libasound and libjack and sets
// JACK_NO_START_SERVER=1 so that probing never launches a JACK server; Options.Verbose
// keeps the messages for debugging. PortAudio's own "Expression ... failed" lines,
// printed when a stream dies, cannot be redirected here: the shared libportaudio does not
// export its debug hook (PaUtil_SetDebugPrintFunction is only in the static library), so
// they still reach stderr.
package portaudio

/*
#include <portaudio.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure Open.
type Options struct {
	// Verbose keeps ALSA's and JACK's diagnostics on stderr instead of silencing them.
	Verbose bool
}

// Host is one initialisation of PortAudio. Each user (the microphone, the speaker, the
// command line) opens its own and closes it when done; PortAudio counts the
// initialisations itself and shuts down with the last Close. PortAudio scans devices
// when the first Host opens, so a device that appears later (a null sink loaded by a
// test, a headset plugged in) is seen only once every Host was closed and a new one
// opened.
//
// A Host is safe for concurrent use.
type Host struct {
	mu      sync.Mutex
	closed  bool
	streams map[*Stream]struct{}
	stuck   atomic.Bool // a stream's end did not return: PortAudio is left as it is
}

// Open initialises PortAudio.
func Open(opts Options) (*Host, error) {
	if !opts.Verbose {
		if _, set := os.LookupEnv("JACK_NO_START_SERVER"); !set {
			// Probing must never start a JACK server as a side effect. This is the
			// documented libjack switch; setting it process-wide is the only way to reach it.
			_ = os.Setenv("JACK_NO_START_SERVER", "1")
		}
	}
	// PortAudio scans the devices here, and ALSA's pulse plugin waits for the sound
	// server's answer without a limit: a frozen server would hold the caller for good.
	err := within(openWait, func() error {
		if err := lockPA(openWait); err != nil {
			return err
		}
		defer unlockPA()
		quietNative(!opts.Verbose)
		return paError(C.Pa_Initialize())
	})
	if err != nil {
		return nil, fmt.Errorf("device: initialise PortAudio: %w", err)
	}
	return &Host{streams: make(map[*Stream]struct{})}, nil
}

// openWait bounds Open. A device scan takes well under a second where the audio system
// answers; one that does not is given up (PortAudio may then end up initialised once
// more than Hosts were opened, which costs nothing but memory).
const openWait = 10 * time.Second

// ErrClosed is returned by a Host or Stream used after Close.
var ErrClosed = errors.New("device: closed")

// Close closes the streams still open on h and releases h's PortAudio initialisation.
// Closing twice is harmless.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	open := make([]*Stream, 0, len(h.streams))
	for s := range h.streams {
		open = append(open, s)
	}
	h.mu.Unlock()
	var errs []error
	for _, s := range open {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if h.stuck.Load() {
		// Pa_Terminate would wait for the stream that did not end.
		return errors.Join(append(errs, fmt.Errorf("device: terminate PortAudio: %w: a stream did not end", ErrStuck))...)
	}
	err := within(endWait, func() error {
		if err := lockPA(endWait); err != nil {
			return err
		}
		defer unlockPA()
		return paError(C.Pa_Terminate())
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("device: terminate PortAudio: %w", err))
	}
	return errors.Join(errs...)
}

func (h *Host) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	return nil
}

// HostAPI describes one of PortAudio's host APIs (ALSA, JACK, CoreAudio, WASAPI, ...).
type HostAPI struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	DeviceCount int    `json:"device_count"`
	// DefaultInput and DefaultOutput are device indices, -1 for none.
	DefaultInput  int  `json:"default_input"`
	DefaultOutput int  `json:"default_output"`
	IsDefault     bool `json:"is_default"`
}

// Info describes a device as PortAudio sees it.
type Info struct {
	// Index is PortAudio's device index: valid until PortAudio rescans (the next time
	// every Host was closed), and not stable across reboots.
	Index   int    `json:"index"`
	Name    string `json:"name"`
	HostAPI string `json:"host_api"`
	// MaxInputChannels and MaxOutputChannels are 0 for a device without that direction.
	MaxInputChannels  int     `json:"max_input_channels"`
	MaxOutputChannels int     `json:"max_output_channels"`
	DefaultSampleRate float64 `json:"default_sample_rate"`
	// The default latencies are PortAudio's suggestions for interactive (low) and
	// robust (high) use.
	DefaultLowInputLatency   time.Duration `json:"default_low_input_latency"`
	DefaultHighInputLatency  time.Duration `json:"default_high_input_latency"`
	DefaultLowOutputLatency  time.Duration `json:"default_low_output_latency"`
	DefaultHighOutputLatency time.Duration `json:"default_high_output_latency"`
	// IsDefaultInput and IsDefaultOutput mark the system's default devices (those of
	// the default host API).
	IsDefaultInput  bool `json:"is_default_input"`
	IsDefaultOutput bool `json:"is_default_output"`
	// ServerDevice is set when the device was chosen by one of the sound server's sources
	// or sinks (see SelectFrom): the stream opens on this device, ALSA's "pulse", and is
	// directed to that source or sink.
	ServerDevice *ServerDevice `json:"server_device,omitempty"`
}

// Has reports whether the device works in direction dir.
func (i Info) Has(dir Direction) bool {
	if dir == Input {
		return i.MaxInputChannels > 0
	}
	return i.MaxOutputChannels > 0
}

// HostAPIs lists PortAudio's host APIs.
func (h *Host) HostAPIs() ([]HostAPI, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	if err := lockPA(lockWait); err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	defer unlockPA()
	n := C.Pa_GetHostApiCount()
	if n < 0 {
		return nil, fmt.Errorf("device: host APIs: %w", paError(C.PaError(n)))
	}
	def := C.Pa_GetDefaultHostApi()
	apis := make([]HostAPI, 0, int(n))
	for i := C.PaHostApiIndex(0); i < n; i++ {
		info := C.Pa_GetHostApiInfo(i)
		if info == nil {
			continue
		}
		apis = append(apis, HostAPI{
			Index:         int(i),
			Name:          C.GoString(info.name),
			DeviceCount:   int(info.deviceCount),
			DefaultInput:  int(info.defaultInputDevice),
			DefaultOutput: int(info.defaultOutputDevice),
			IsDefault:     i == def,
		})
	}
	return apis, nil
}

// Devices lists every device PortAudio found, in index order.
func (h *Host) Devices() ([]Info, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	if err := lockPA(lockWait); err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	defer unlockPA()
	return devicesLocked()
}

func devicesLocked() ([]Info, error) {
	n := C.Pa_GetDeviceCount()
	if n < 0 {
		return nil, fmt.Errorf("device: list devices: %w", paError(C.PaError(n)))
	}
	defIn, defOut := C.Pa_GetDefaultInputDevice(), C.Pa_GetDefaultOutputDevice()
	out := make([]Info, 0, int(n))
	for i := C.PaDeviceIndex(0); i < n; i++ {
		d := C.Pa_GetDeviceInfo(i)
		if d == nil {
			continue
		}
		info := Info{
			Index:                    int(i),
			Name:                     C.GoString(d.name),
			MaxInputChannels:         int(d.maxInputChannels),
			MaxOutputChannels:        int(d.maxOutputChannels),
			DefaultSampleRate:        float64(d.defaultSampleRate),
			DefaultLowInputLatency:   seconds(d.defaultLowInputLatency),
			DefaultHighInputLatency:  seconds(d.defaultHighInputLatency),
			DefaultLowOutputLatency:  seconds(d.defaultLowOutputLatency),
			DefaultHighOutputLatency: seconds(d.defaultHighOutputLatency),
			IsDefaultInput:           i == defIn,
			IsDefaultOutput:          i == defOut,
		}
		if api := C.Pa_GetHostApiInfo(d.hostApi); api != nil {
			info.HostAPI = C.GoString(api.name)
		}
		out = append(out, info)
	}
	return out, nil
}

// Find returns the device that spec names for direction dir among PortAudio's devices
// and the sound server's sources or sinks; see SelectFrom for the rules. The sound
// server is asked only when spec is not empty, not an exact PortAudio name and not an
// index; when none answers, PortAudio's devices are all there is.
func (h *Host) Find(spec string, dir Direction) (Info, error) {
	devs, err := h.Devices()
	if err != nil {
		return Info{}, err
	}
	if spec == "" || isIndex(spec) {
		return Select(devs, spec, dir)
	}
	if d, ok := exactName(devs, spec); ok && d.Has(dir) {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), serverQueryTimeout)
	defer cancel()
	srv, serr := QuerySoundServer(ctx)
	d, err := SelectFrom(devs, srv.Devices(dir), spec, dir)
	if err != nil && serr != nil {
		return Info{}, fmt.Errorf("%w (the sound server's devices were not searched: %v)", err, serr)
	}
	return d, err
}

// serverQueryTimeout bounds how long Find waits for the sound server.
const serverQueryTimeout = 2 * time.Second

func isIndex(spec string) bool {
	_, err := strconv.Atoi(strings.TrimSpace(spec))
	return err == nil
}
