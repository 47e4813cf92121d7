package pipeline

import (
	"context"
	"strings"

	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/soundserver"
	"github.com/parley-voice/parley/modules/aec"
)

// EchoSetup is what a live session's echo cancellation decision was made from.
type EchoSetup struct {
	Decision aec.Decision
	// Devices are the devices as they were found (names, the sound server's
	// description and properties).
	Devices aec.Devices
	// Server is the sound server that was asked ("" when none was, or none answered).
	Server string
	// Problems are what could not be found out (the decision is made without it).
	Problems []string
}

// ResolveEchoCancel decides whether a live session cancels echo (audio.echo_cancel;
// see aec.Decide). In auto mode it looks at the configured devices: their PortAudio
// names and, when they lead to the sound server ("pulse", "default", "pipewire"), the
// server's default sink and source (audio/soundserver).
func ResolveEchoCancel(ctx context.Context, cfg AudioConfig) EchoSetup {
	mode := cfg.EchoCancelMode()
	if mode != aec.Auto {
		return EchoSetup{Decision: aec.Decide(mode, aec.Devices{})}
	}
	var s EchoSetup
	var viaServer bool
	if h, err := device.Open(device.Options{}); err != nil {
		s.Problems = append(s.Problems, err.Error())
	} else {
		for _, d := range []struct {
			spec string
			dir  device.Direction
			dev  *aec.Device
		}{{cfg.Output, device.Output, &s.Devices.Output}, {cfg.Input, device.Input, &s.Devices.Input}} {
			info, err := h.Find(d.spec, d.dir)
			if err != nil {
				s.Problems = append(s.Problems, err.Error())
				continue
			}
			d.dev.Names = append(d.dev.Names, info.Name)
			viaServer = viaServer || soundServerDevice(info)
		}
		h.Close()
	}
	if viaServer {
		if info, err := soundserver.Query(ctx); err != nil {
			s.Problems = append(s.Problems, err.Error())
		} else {
			s.Server = info.Server
			for _, d := range []struct {
				from soundserver.Device
				to   *aec.Device
			}{{info.DefaultSink, &s.Devices.Output}, {info.DefaultSource, &s.Devices.Input}} {
				d.to.Names = append(d.to.Names, d.from.Name)
				if d.from.Description != "" {
					d.to.Names = append(d.to.Names, d.from.Description)
				}
				d.to.Properties = d.from.Properties
			}
		}
	}
	s.Decision = aec.Decide(mode, s.Devices)
	return s
}

// soundServerDevice reports whether a PortAudio device plays or records through the
// sound server's default devices.
func soundServerDevice(d device.Info) bool {
	switch strings.ToLower(d.Name) {
	case "pulse", "default", "pipewire":
		return true
	}
	return strings.Contains(strings.ToLower(d.HostAPI), "pulse")
}
