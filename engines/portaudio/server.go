package portaudio

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/engines/pulse"
)

// SoundServer is what the sound server (PulseAudio, or PipeWire's PulseAudio server)
// reports: its sources and sinks, which PortAudio 19.7 cannot list (it has no PulseAudio
// host API and sees only ALSA's "pulse" and "default" devices).
type SoundServer struct {
	// Name is the server's name ("pulseaudio", or "PulseAudio (on PipeWire x.y)").
	Name    string         `json:"name"`
	Version string         `json:"version"`
	Sources []ServerDevice `json:"sources"`
	Sinks   []ServerDevice `json:"sinks"`
}

// Devices returns the sources for Input, the sinks for Output.
func (s SoundServer) Devices(dir Direction) []ServerDevice {
	if dir == Input {
		return s.Sources
	}
	return s.Sinks
}

// QuerySoundServer asks the sound server ($PULSE_SERVER, else the user's) for its sources
// and sinks. Without a server it fails (wrapping pulse.ErrNoServer) within ctx's deadline
// or two seconds, whichever is sooner.
func QuerySoundServer(ctx context.Context) (SoundServer, error) {
	opts := pulse.Options{}
	if d, ok := ctx.Deadline(); ok {
		opts.Timeout = max(time.Until(d), time.Millisecond)
	}
	c, err := pulse.Connect(ctx, opts)
	if err != nil {
		return SoundServer{}, fmt.Errorf("device: %w", err)
	}
	defer c.Close()
	info, err := c.ServerInfo(ctx)
	if err != nil {
		return SoundServer{}, fmt.Errorf("device: %w", err)
	}
	sources, err := c.Sources(ctx)
	if err != nil {
		return SoundServer{}, fmt.Errorf("device: %w", err)
	}
	sinks, err := c.Sinks(ctx)
	if err != nil {
		return SoundServer{}, fmt.Errorf("device: %w", err)
	}
	return SoundServer{Name: info.Name, Version: info.Version, Sources: serverDevices(sources), Sinks: serverDevices(sinks)}, nil
}

func serverDevices(devs []pulse.Device) []ServerDevice {
	out := make([]ServerDevice, len(devs))
	for i, d := range devs {
		out[i] = ServerDevice{
			Name: d.Name, Description: d.Description, Monitor: d.IsMonitor(), Default: d.Default,
			Format: d.SampleSpec.Format, Rate: d.SampleSpec.Rate, Channels: d.SampleSpec.Channels,
		}
	}
	return out
}
