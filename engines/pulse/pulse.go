// Package pulse is a thin binding to libpulse's introspection API: it connects to the
// PulseAudio server (or PipeWire's PulseAudio server) and lists its sources and sinks, with
// the descriptions people know them by ("Blue Yeti USB Mic", "WH-1000XM4 headset").
//
// PortAudio 19.7 has no PulseAudio host API; it reaches the server through ALSA's "pulse"
// device, whose streams go to the server's default source or sink unless PULSE_SOURCE or
// PULSE_SINK name another. engines/portaudio uses this package to let a configuration name a
// source or sink, and 'agent devices' to show them.
//
// A Client owns a libpulse main loop and context, which it runs only inside its own calls;
// no thread of libpulse's keeps running between them, and nothing is package-level.
package pulse

import (
	"errors"
	"time"
)

// Options configure Connect.
type Options struct {
	// Server is the server to connect to ("unix:/run/user/1000/pulse/native",
	// "tcp:host"); empty for libpulse's own choice: $PULSE_SERVER, client.conf, then the
	// user's default socket.
	Server string
	// Timeout bounds the connection and each query (2 s when zero): a server that does not
	// answer is treated as absent.
	Timeout time.Duration
	// AppName is the client name the server shows ("parley" when empty).
	AppName string
}

// SampleSpec is a device's native sample format.
type SampleSpec struct {
	// Format is libpulse's name of the sample format ("s16le", "float32le", ...).
	Format   string `json:"format"`
	Rate     int    `json:"rate"`
	Channels int    `json:"channels"`
}

// Device is a source (an input, including monitors of sinks) or a sink (an output).
type Device struct {
	Index       int        `json:"index"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	SampleSpec  SampleSpec `json:"sample_spec"`
	// MonitorOf is, for a monitor source, the name of the sink it records; empty for
	// real inputs and for sinks.
	MonitorOf string `json:"monitor_of,omitempty"`
	// Default marks the server's default source or sink.
	Default bool `json:"default"`
}

// IsMonitor reports whether the device is a monitor source (what a sink plays).
func (d Device) IsMonitor() bool { return d.MonitorOf != "" }

// ServerInfo describes the server.
type ServerInfo struct {
	// Name is the server's package name: "pulseaudio", or "PulseAudio (on PipeWire x.y)".
	Name          string `json:"name"`
	Version       string `json:"version"`
	DefaultSink   string `json:"default_sink"`
	DefaultSource string `json:"default_source"`
}

var (
	// ErrNoServer is wrapped by Connect's error when no server accepted the connection
	// within the timeout.
	ErrNoServer = errors.New("no PulseAudio server answered")
	// ErrTimeout is wrapped by a query's error when the server did not answer in time.
	ErrTimeout = errors.New("the sound server did not answer in time")
	// ErrClosed is returned by a Client used after Close.
	ErrClosed = errors.New("pulse: client closed")
	// ErrUnsupported is returned by Connect where this package has no libpulse (outside
	// Linux).
	ErrUnsupported = errors.New("pulse: libpulse is not supported on this system")
)

const defaultTimeout = 2 * time.Second
