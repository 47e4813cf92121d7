// Package soundserver asks the desktop's sound server — PulseAudio, or PipeWire through
// its PulseAudio server — about its default devices, with the pactl command, so that
// Parley can tell where its "pulse" and "default" devices really lead: a laptop's
// speakers, a headset, an echo-cancelled microphone.
package soundserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// ErrUnavailable is wrapped by Query's error when there is no pactl or no server.
var ErrUnavailable = errors.New("no sound server answers")

// Device is a sink or source as the server describes it.
type Device struct {
	Name        string
	Description string
	// Properties are the server's properties (device.form_factor, device.icon_name,
	// device.class, device.bus, ...).
	Properties map[string]string
}

// Info is what Query learns.
type Info struct {
	// Server is the server's name and version ("pulseaudio 17.0", "PulseAudio (on
	// PipeWire 1.2.7) 15.0.0").
	Server string
	// DefaultSink and DefaultSource are where the "pulse" and "default" devices play
	// and record.
	DefaultSink, DefaultSource Device
}

// Timeout bounds Query when its context has no deadline.
const Timeout = 3 * time.Second

// Query asks the server for its default sink and source (pactl --format=json, which
// PulseAudio 16 and PipeWire's pactl understand).
func Query(ctx context.Context) (Info, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	if _, err := exec.LookPath("pactl"); err != nil {
		return Info{}, fmt.Errorf("soundserver: %w: pactl not found", ErrUnavailable)
	}
	pactl := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "pactl", append([]string{"--format=json"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("soundserver: %w: pactl %v: %v: %s", ErrUnavailable, args, err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, nil
	}
	data, err := pactl("info")
	if err != nil {
		return Info{}, err
	}
	server, sink, source, err := ParseInfo(data)
	if err != nil {
		return Info{}, err
	}
	info := Info{Server: server, DefaultSink: Device{Name: sink}, DefaultSource: Device{Name: source}}
	for _, l := range []struct {
		what string
		dev  *Device
	}{{"sinks", &info.DefaultSink}, {"sources", &info.DefaultSource}} {
		data, err := pactl("list", l.what)
		if err != nil {
			return info, err
		}
		devs, err := ParseDevices(data)
		if err != nil {
			return info, err
		}
		for _, d := range devs {
			if d.Name == l.dev.Name {
				*l.dev = d
			}
		}
	}
	return info, nil
}

// ParseInfo reads pactl --format=json info: the server's name and version, and the
// default sink and source names.
func ParseInfo(data []byte) (server, sink, source string, err error) {
	var v struct {
		ServerName    string `json:"server_name"`
		ServerVersion string `json:"server_version"`
		DefaultSink   string `json:"default_sink_name"`
		DefaultSource string `json:"default_source_name"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return "", "", "", fmt.Errorf("soundserver: pactl info: %w", err)
	}
	server = v.ServerName
	if v.ServerVersion != "" {
		server += " " + v.ServerVersion
	}
	return server, v.DefaultSink, v.DefaultSource, nil
}

// ParseDevices reads pactl --format=json list sinks (or sources).
func ParseDevices(data []byte) ([]Device, error) {
	var v []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Properties  map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("soundserver: pactl list: %w", err)
	}
	out := make([]Device, 0, len(v))
	for _, d := range v {
		dev := Device{Name: d.Name, Description: d.Description, Properties: make(map[string]string, len(d.Properties))}
		for k, p := range d.Properties {
			if s, ok := p.(string); ok {
				dev.Properties[k] = s
			} else {
				dev.Properties[k] = fmt.Sprint(p)
			}
		}
		out = append(out, dev)
	}
	return out, nil
}
