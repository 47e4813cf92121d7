package pipeline

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/modules/aec"
)

// EchoSetup is what a live session's echo cancellation decision was made from.
type EchoSetup struct {
	Decision aec.Decision
	// Devices are the devices as they were found: the PortAudio device, and the sound
	// server's source or sink it leads to.
	Devices aec.Devices
	// Server is the sound server that was asked ("" when none was, or none answered).
	Server string
	// Problems are what could not be found out (the decision is made without it).
	Problems []string
}

// serverQuery bounds how long ResolveEchoCancel waits for the sound server.
const serverQuery = 2 * time.Second

// ResolveEchoCancel decides whether a live session cancels echo (audio.echo_cancel;
// see aec.Decide). In auto mode it looks at the configured devices: the PortAudio
// device, and the sound server's source or sink behind it — the one the configuration
// names, or the server's default for "pulse" and "default" (engines/portaudio).
func ResolveEchoCancel(ctx context.Context, cfg AudioConfig) EchoSetup {
	mode := cfg.EchoCancelMode()
	if mode != aec.Auto {
		return EchoSetup{Decision: aec.Decide(mode, aec.Devices{})}
	}
	var s EchoSetup
	h, err := portaudio.Open(portaudio.Options{})
	if err != nil {
		s.Problems = append(s.Problems, err.Error())
		s.Decision = aec.Decide(mode, s.Devices)
		return s
	}
	defer h.Close()
	var srv *portaudio.SoundServer
	server := func() *portaudio.SoundServer {
		if srv == nil {
			qctx, cancel := context.WithTimeout(ctx, serverQuery)
			defer cancel()
			got, err := portaudio.QuerySoundServer(qctx)
			if err != nil {
				s.Problems = append(s.Problems, err.Error())
			} else {
				s.Server = strings.TrimSpace(got.Name + " " + got.Version)
			}
			srv = &got
		}
		return srv
	}
	for _, d := range []struct {
		spec string
		dir  portaudio.Direction
		env  string
		dev  *aec.Device
	}{{cfg.Output, portaudio.Output, "PULSE_SINK", &s.Devices.Output}, {cfg.Input, portaudio.Input, "PULSE_SOURCE", &s.Devices.Input}} {
		info, err := h.Find(d.spec, d.dir)
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			continue
		}
		d.dev.Names = append(d.dev.Names, info.Name)
		sd := info.ServerDevice
		if sd == nil && soundServerDevice(info) {
			sd = serverDefault(server().Devices(d.dir), os.Getenv(d.env))
		}
		if sd != nil {
			d.dev.Names = append(d.dev.Names, sd.Name)
			if sd.Description != "" {
				d.dev.Names = append(d.dev.Names, sd.Description)
			}
			d.dev.Monitor = sd.Monitor
		}
	}
	s.Decision = aec.Decide(mode, s.Devices)
	return s
}

// soundServerDevice reports whether a PortAudio device plays or records through the
// sound server's default devices.
func soundServerDevice(d portaudio.Info) bool {
	switch strings.ToLower(d.Name) {
	case "pulse", "default", "pipewire":
		return true
	}
	return strings.Contains(strings.ToLower(d.HostAPI), "pulse")
}

// serverDefault returns the device libpulse would use: the one named (PULSE_SINK or
// PULSE_SOURCE), else the server's default.
func serverDefault(devs []portaudio.ServerDevice, named string) *portaudio.ServerDevice {
	for i, d := range devs {
		if named != "" && d.Name == named {
			return &devs[i]
		}
	}
	for i, d := range devs {
		if d.Default {
			return &devs[i]
		}
	}
	return nil
}
