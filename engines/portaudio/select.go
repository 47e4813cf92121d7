package portaudio

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Direction is a stream direction.
type Direction uint8

const (
	// Input is capture (microphones).
	Input Direction = iota + 1
	// Output is playback (speakers).
	Output
)

func (d Direction) String() string {
	switch d {
	case Input:
		return "input"
	case Output:
		return "output"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

var (
	// ErrNotFound is wrapped by Select's error when no device matches.
	ErrNotFound = errors.New("no such audio device")
	// ErrAmbiguous is wrapped by Select's error when a substring matches several devices.
	ErrAmbiguous = errors.New("ambiguous audio device")
)

// ServerDevice is one of the sound server's sources (inputs) or sinks (outputs), as
// PulseAudio, or PipeWire's PulseAudio server, reports it.
type ServerDevice struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Monitor marks a monitor source: it records what a sink plays.
	Monitor bool `json:"monitor,omitempty"`
	// Default marks the server's default source or sink.
	Default bool `json:"default,omitempty"`
	// Format, Rate and Channels are the device's native sample format.
	Format   string `json:"format"`
	Rate     int    `json:"rate"`
	Channels int    `json:"channels"`
}

// Select picks the device that spec names among devs, considering only devices that
// work in direction dir. It is SelectFrom without a sound server.
func Select(devs []Info, spec string, dir Direction) (Info, error) {
	return SelectFrom(devs, nil, spec, dir)
}

// SelectFrom picks the device that spec names among PortAudio's devices devs and the
// sound server's devices server (its sources for Input, its sinks for Output),
// considering only devices that work in direction dir. spec is tried, in this order, as
//
//   - empty: the system's default device for dir;
//   - an exact PortAudio device name (the first in index order if several share it);
//   - an exact sound-server device name ("alsa_input.usb-...");
//   - a decimal index, as 'agent devices' prints it;
//   - a PortAudio device name, ignoring case;
//   - a sound-server device name or description ("Blue Yeti USB Mic"), ignoring case;
//   - a case-insensitive part of exactly one device's name or description (of either
//     kind; the server's monitor sources count only when nothing else matches).
//
// A sound-server device is reached through PortAudio's ALSA "pulse" device: the Info
// returned is that device, with ServerDevice set to the source or sink the stream must
// be directed to (Host's streams do that when they open). Prefer names in
// configurations: indices change when devices come and go. When nothing or several
// match, the error lists the devices that would have been accepted.
func SelectFrom(devs []Info, server []ServerDevice, spec string, dir Direction) (Info, error) {
	var usable []Info
	for _, d := range devs {
		if d.Has(dir) {
			usable = append(usable, d)
		}
	}
	if spec == "" {
		for _, d := range usable {
			if (dir == Input && d.IsDefaultInput) || (dir == Output && d.IsDefaultOutput) {
				return d, nil
			}
		}
		return Info{}, fmt.Errorf("device: %w: there is no default %s device; %s", ErrNotFound, dir, available(usable, server, dir))
	}
	if d, ok := exactName(usable, spec); ok {
		return d, nil
	}
	for _, sd := range server {
		if sd.Name == spec {
			return route(usable, server, sd, dir)
		}
	}
	if idx, err := strconv.Atoi(strings.TrimSpace(spec)); err == nil {
		for _, d := range devs {
			if d.Index != idx {
				continue
			}
			if !d.Has(dir) {
				return Info{}, fmt.Errorf("device: %w: device %d (%q) has no %s channels; %s", ErrNotFound, idx, d.Name, dir, available(usable, server, dir))
			}
			return d, nil
		}
		return Info{}, fmt.Errorf("device: %w: no device with index %d; %s", ErrNotFound, idx, available(usable, server, dir))
	}
	for _, d := range usable {
		if strings.EqualFold(d.Name, spec) {
			return d, nil
		}
	}
	var equal []ServerDevice
	for _, sd := range server {
		if strings.EqualFold(sd.Name, spec) || strings.EqualFold(sd.Description, spec) {
			equal = append(equal, sd)
		}
	}
	switch len(equal) {
	case 1:
		return route(usable, server, equal[0], dir)
	case 0:
	default:
		return Info{}, fmt.Errorf("device: %w: %q names %d %s (%s); use the name instead",
			ErrAmbiguous, spec, len(equal), serverNoun(dir, true), quotedServer(equal))
	}

	want := strings.ToLower(spec)
	var matches []Info
	for _, d := range usable {
		if strings.Contains(strings.ToLower(d.Name), want) {
			matches = append(matches, d)
		}
	}
	var serverMatches, monitors []ServerDevice
	for _, sd := range server {
		if !strings.Contains(strings.ToLower(sd.Name), want) && !strings.Contains(strings.ToLower(sd.Description), want) {
			continue
		}
		if sd.Monitor {
			monitors = append(monitors, sd)
		} else {
			serverMatches = append(serverMatches, sd)
		}
	}
	if len(matches)+len(serverMatches) == 0 {
		serverMatches = monitors
	}
	switch {
	case len(matches) == 1 && len(serverMatches) == 0:
		return matches[0], nil
	case len(matches) == 0 && len(serverMatches) == 1:
		return route(usable, server, serverMatches[0], dir)
	case len(matches)+len(serverMatches) == 0:
		return Info{}, fmt.Errorf("device: %w: no %s device named or containing %q; %s", ErrNotFound, dir, spec, available(usable, server, dir))
	}
	var found []string
	if len(matches) > 0 {
		found = append(found, quotedNames(matches))
	}
	if len(serverMatches) > 0 {
		found = append(found, serverNoun(dir, true)+" "+quotedServer(serverMatches))
	}
	return Info{}, fmt.Errorf("device: %w: %q matches %d %s devices (%s); use a longer part of the name",
		ErrAmbiguous, spec, len(matches)+len(serverMatches), dir, strings.Join(found, "; "))
}

func exactName(usable []Info, spec string) (Info, bool) {
	for _, d := range usable {
		if d.Name == spec {
			return d, true
		}
	}
	return Info{}, false
}

// routeDevice is the PortAudio device that reaches the sound server: ALSA's pulse plugin.
const routeDevice = "pulse"

// route returns the PortAudio device through which sd is reached, directed to sd.
func route(usable []Info, server []ServerDevice, sd ServerDevice, dir Direction) (Info, error) {
	for _, d := range usable {
		if d.Name == routeDevice && d.HostAPI == "ALSA" {
			d.ServerDevice = &sd
			return d, nil
		}
	}
	return Info{}, fmt.Errorf("device: %w: %q is the sound server's %s, but PortAudio has no ALSA %q device to reach it (install ALSA's pulse plugin: Debian's libasound2-plugins); %s",
		ErrNotFound, sd.Name, serverNoun(dir, false), routeDevice, available(usable, server, dir))
}

func serverNoun(dir Direction, plural bool) string {
	noun := "sink"
	if dir == Input {
		noun = "source"
	}
	if plural {
		noun += "s"
	}
	return "sound server " + noun
}

func available(usable []Info, server []ServerDevice, dir Direction) string {
	var list string
	if len(usable) == 0 {
		list = "PortAudio sees no " + dir.String() + " devices at all (is a sound server running? see 'agent devices')"
	} else {
		list = dir.String() + " devices: " + quotedNames(usable)
	}
	if len(server) > 0 {
		list += "; " + serverNoun(dir, true) + ": " + quotedServer(server)
	}
	return list
}

func quotedNames(devs []Info) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = fmt.Sprintf("%d %q (%s)", d.Index, d.Name, d.HostAPI)
	}
	return strings.Join(parts, ", ")
}

func quotedServer(devs []ServerDevice) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = fmt.Sprintf("%q (%s)", d.Name, d.Description)
	}
	return strings.Join(parts, ", ")
}
