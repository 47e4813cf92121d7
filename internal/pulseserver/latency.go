package pulseserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Latencies is the server's account of its buffering at one moment: each stream's and
// each device's latency, as pactl reports them.
type Latencies struct {
	Streams []StreamLatency
	Devices []DeviceLatency
}

// StreamLatency is one client stream's buffering.
type StreamLatency struct {
	// Playback is true for a playback stream (a sink input), false for a recording
	// (a source output).
	Playback bool
	Index    int
	// Device is the name of the sink it plays to or the source it records from.
	Device string
	// Application and Media are the client's application.name and media.name.
	Application, Media string
	// Buffer is the audio waiting in the stream's own buffer between the client and
	// the device.
	Buffer time.Duration
	// DeviceLatency is the device's latency as the stream sees it (the sink's for
	// playback, the source's for a recording).
	DeviceLatency time.Duration
}

// Total is the stream's whole latency: its buffer and its device's.
func (s StreamLatency) Total() time.Duration { return s.Buffer + s.DeviceLatency }

// DeviceLatency is a sink's or a source's latency.
type DeviceLatency struct {
	Sink bool // false: a source
	Name string
	// Actual is the latency now; Configured is what the device was set up for.
	Actual, Configured time.Duration
}

// Latencies asks the server (pactl's JSON output) for its streams' and devices'
// latencies.
func (s *Server) Latencies(ctx context.Context) (Latencies, error) {
	var out [4][]byte
	for i, kind := range []string{"sinks", "sources", "sink-inputs", "source-outputs"} {
		text, err := s.Pactl(ctx, "--format=json", "list", kind)
		if err != nil {
			return Latencies{}, err
		}
		out[i] = []byte(text)
	}
	return ParseLatencies(out[0], out[1], out[2], out[3])
}

// The parts of pactl's JSON that ParseLatencies reads.
type pactlDevice struct {
	Index   int    `json:"index"`
	Name    string `json:"name"`
	Latency struct {
		Actual     float64 `json:"actual"`
		Configured float64 `json:"configured"`
	} `json:"latency"`
}

type pactlStream struct {
	Index         int               `json:"index"`
	Sink          *int              `json:"sink"`
	Source        *int              `json:"source"`
	BufferLatency float64           `json:"buffer_latency_usec"`
	SinkLatency   float64           `json:"sink_latency_usec"`
	SourceLatency float64           `json:"source_latency_usec"`
	Properties    map[string]string `json:"properties"`
}

// ParseLatencies reads the JSON that `pactl --format=json list` prints for sinks,
// sources, sink-inputs and source-outputs.
func ParseLatencies(sinks, sources, sinkInputs, sourceOutputs []byte) (Latencies, error) {
	var l Latencies
	names := [2]map[int]string{{}, {}} // sinks, sources by index
	for i, data := range [][]byte{sinks, sources} {
		var devs []pactlDevice
		if err := json.Unmarshal(data, &devs); err != nil {
			return Latencies{}, fmt.Errorf("pulseserver: pactl's %s: %w", [2]string{"sinks", "sources"}[i], err)
		}
		for _, d := range devs {
			actual, err := usec(d.Latency.Actual)
			if err != nil {
				return Latencies{}, err
			}
			configured, err := usec(d.Latency.Configured)
			if err != nil {
				return Latencies{}, err
			}
			names[i][d.Index] = d.Name
			l.Devices = append(l.Devices, DeviceLatency{Sink: i == 0, Name: d.Name, Actual: actual, Configured: configured})
		}
	}
	for i, data := range [][]byte{sinkInputs, sourceOutputs} {
		playback := i == 0
		var streams []pactlStream
		if err := json.Unmarshal(data, &streams); err != nil {
			return Latencies{}, fmt.Errorf("pulseserver: pactl's %s: %w", [2]string{"sink inputs", "source outputs"}[i], err)
		}
		for _, st := range streams {
			dev, devLat := st.Source, st.SourceLatency
			if playback {
				dev, devLat = st.Sink, st.SinkLatency
			}
			buffer, err := usec(st.BufferLatency)
			if err != nil {
				return Latencies{}, err
			}
			device, err := usec(devLat)
			if err != nil {
				return Latencies{}, err
			}
			sl := StreamLatency{Playback: playback, Index: st.Index, Buffer: buffer, DeviceLatency: device,
				Application: st.Properties["application.name"], Media: st.Properties["media.name"]}
			if dev != nil {
				sl.Device = names[i][*dev]
				if sl.Device == "" {
					sl.Device = fmt.Sprintf("#%d", *dev)
				}
			}
			l.Streams = append(l.Streams, sl)
		}
	}
	return l, nil
}

// usec converts pactl's microseconds, refusing what no latency can be.
func usec(v float64) (time.Duration, error) {
	if math.IsNaN(v) || v < 0 || v > float64(time.Hour/time.Microsecond) {
		return 0, fmt.Errorf("pulseserver: pactl reported a latency of %v µs", v)
	}
	return time.Duration(v * float64(time.Microsecond)), nil
}
