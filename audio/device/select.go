package device

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

// Select picks the device that spec names among devs, considering only devices that
// work in direction dir. spec is tried, in this order, as
//
//   - empty: the system's default device for dir;
//   - an exact device name (the first in index order if several share it);
//   - a decimal index, as 'agent devices' prints it;
//   - a device name, ignoring case;
//   - a case-insensitive substring of exactly one device's name.
//
// Prefer names in configurations: indices change when devices come and go. When
// nothing matches, the error lists the devices that would have been accepted.
func Select(devs []Info, spec string, dir Direction) (Info, error) {
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
		return Info{}, fmt.Errorf("device: %w: there is no default %s device; %s", ErrNotFound, dir, available(usable, dir))
	}
	for _, d := range usable {
		if d.Name == spec {
			return d, nil
		}
	}
	if idx, err := strconv.Atoi(strings.TrimSpace(spec)); err == nil {
		for _, d := range devs {
			if d.Index != idx {
				continue
			}
			if !d.Has(dir) {
				return Info{}, fmt.Errorf("device: %w: device %d (%q) has no %s channels; %s", ErrNotFound, idx, d.Name, dir, available(usable, dir))
			}
			return d, nil
		}
		return Info{}, fmt.Errorf("device: %w: no device with index %d; %s", ErrNotFound, idx, available(usable, dir))
	}
	for _, d := range usable {
		if strings.EqualFold(d.Name, spec) {
			return d, nil
		}
	}
	want := strings.ToLower(spec)
	var matches []Info
	for _, d := range usable {
		if strings.Contains(strings.ToLower(d.Name), want) {
			matches = append(matches, d)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return Info{}, fmt.Errorf("device: %w: no %s device named or containing %q; %s", ErrNotFound, dir, spec, available(usable, dir))
	}
	return Info{}, fmt.Errorf("device: %w: %q matches %d %s devices (%s); use a longer part of the name",
		ErrAmbiguous, spec, len(matches), dir, quotedNames(matches))
}

func available(usable []Info, dir Direction) string {
	if len(usable) == 0 {
		return "PortAudio sees no " + dir.String() + " devices at all (is a sound server running? see 'agent devices')"
	}
	return dir.String() + " devices: " + quotedNames(usable)
}

func quotedNames(devs []Info) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = fmt.Sprintf("%d %q (%s)", d.Index, d.Name, d.HostAPI)
	}
	return strings.Join(parts, ", ")
}
