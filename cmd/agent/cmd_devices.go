package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/engines/portaudio"
)

func devicesCommand() command {
	return command{
		Name:    "devices",
		Summary: "list audio input and output devices (names, host API, rates, channels, latencies, defaults) and the sound server's sources and sinks",
		Run:     runDevices,
	}
}

// devicesReport is what 'agent devices --json' prints.
type devicesReport struct {
	PortAudio string              `json:"portaudio"`
	HostAPIs  []portaudio.HostAPI `json:"host_apis"`
	Devices   []deviceJSON        `json:"devices"`
	// SoundServer is what PulseAudio (or PipeWire's PulseAudio server) lists, when one
	// answers; SoundServerError says why not otherwise.
	SoundServer      *portaudio.SoundServer `json:"sound_server,omitempty"`
	SoundServerError string                 `json:"sound_server_error,omitempty"`
}

// deviceJSON is portaudio.Info with latencies in milliseconds, for people and scripts.
type deviceJSON struct {
	Index             int     `json:"index"`
	Name              string  `json:"name"`
	HostAPI           string  `json:"host_api"`
	MaxInputChannels  int     `json:"max_input_channels"`
	MaxOutputChannels int     `json:"max_output_channels"`
	DefaultSampleRate float64 `json:"default_sample_rate"`
	LowInputMs        float64 `json:"default_low_input_latency_ms"`
	HighInputMs       float64 `json:"default_high_input_latency_ms"`
	LowOutputMs       float64 `json:"default_low_output_latency_ms"`
	HighOutputMs      float64 `json:"default_high_output_latency_ms"`
	DefaultInput      bool    `json:"default_input"`
	DefaultOutput     bool    `json:"default_output"`
}

func devicesMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func runDevices(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "devices", "")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	inputs := fs.Bool("input", false, "list input devices only")
	outputs := fs.Bool("output", false, "list output devices only")
	verbose := fs.Bool("verbose", false, "let ALSA and JACK print their probing diagnostics")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := portaudio.Open(portaudio.Options{Verbose: *verbose})
	if err != nil {
		return fmt.Errorf("%w (is a sound server running, or a sound card present?)", err)
	}
	defer h.Close()
	apis, err := h.HostAPIs()
	if err != nil {
		return err
	}
	devs, err := h.Devices()
	if err != nil {
		return err
	}
	want := func(d portaudio.Info) bool {
		switch {
		case *inputs && !*outputs:
			return d.Has(portaudio.Input)
		case *outputs && !*inputs:
			return d.Has(portaudio.Output)
		}
		return true
	}
	rep := devicesReport{PortAudio: portaudio.Version(), HostAPIs: apis, Devices: []deviceJSON{}}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	srv, err := portaudio.QuerySoundServer(qctx)
	cancel()
	if err != nil {
		rep.SoundServerError = err.Error()
	} else {
		if *inputs && !*outputs {
			srv.Sinks = nil
		}
		if *outputs && !*inputs {
			srv.Sources = nil
		}
		rep.SoundServer = &srv
	}
	for _, d := range devs {
		if !want(d) {
			continue
		}
		rep.Devices = append(rep.Devices, deviceJSON{
			Index: d.Index, Name: d.Name, HostAPI: d.HostAPI,
			MaxInputChannels: d.MaxInputChannels, MaxOutputChannels: d.MaxOutputChannels,
			DefaultSampleRate: d.DefaultSampleRate,
			LowInputMs:        devicesMillis(d.DefaultLowInputLatency), HighInputMs: devicesMillis(d.DefaultHighInputLatency),
			LowOutputMs: devicesMillis(d.DefaultLowOutputLatency), HighOutputMs: devicesMillis(d.DefaultHighOutputLatency),
			DefaultInput: d.IsDefaultInput, DefaultOutput: d.IsDefaultOutput,
		})
	}
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printDeviceTables(a.stdout, rep, !*outputs || *inputs, !*inputs || *outputs)
	return nil
}

func printDeviceTables(w io.Writer, rep devicesReport, inputs, outputs bool) {
	fmt.Fprintf(w, "%s\n\nhost APIs\n", rep.PortAudio)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, api := range rep.HostAPIs {
		mark := ""
		if api.IsDefault {
			mark = "default"
		}
		fmt.Fprintf(tw, "  %s\t%d device(s)\t%s\n", api.Name, api.DeviceCount, mark)
	}
	tw.Flush()
	section := func(title string, input bool) {
		fmt.Fprintf(w, "\n%s\n", title)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tindex\tname\thost API\tchannels\tdefault rate\tlatency low/high")
		n := 0
		for _, d := range rep.Devices {
			ch, low, high, def := d.MaxOutputChannels, d.LowOutputMs, d.HighOutputMs, d.DefaultOutput
			if input {
				ch, low, high, def = d.MaxInputChannels, d.LowInputMs, d.HighInputMs, d.DefaultInput
			}
			if ch == 0 {
				continue
			}
			mark := ""
			if def {
				mark = "*"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%d\t%.0f Hz\t%.1f / %.1f ms\n", mark, d.Index, d.Name, d.HostAPI, ch, d.DefaultSampleRate, low, high)
			n++
		}
		if n == 0 {
			fmt.Fprintln(tw, "  \t\t(none: is a sound server running, or a sound card present?)")
		}
		tw.Flush()
	}
	if inputs {
		section("input devices (* default)", true)
	}
	if outputs {
		section("output devices (* default)", false)
	}
	printSoundServer(w, rep, inputs, outputs)
	fmt.Fprintln(w, "\nChoose a device by name (or a unique part of it) in the configuration: names survive")
	fmt.Fprintln(w, "reboots and re-plugging, indices do not. A sound server's source or sink is chosen by")
	fmt.Fprintln(w, "its name or description (or a unique part of either, e.g. --input \"USB Mic\") and reached")
	fmt.Fprintln(w, "through ALSA's \"pulse\" device.")
}

// printSoundServer lists the sound server's sources and sinks, which PortAudio only
// reaches through ALSA's "pulse" device.
func printSoundServer(w io.Writer, rep devicesReport, inputs, outputs bool) {
	srv := rep.SoundServer
	if srv == nil {
		fmt.Fprintf(w, "\nsound server: none answered (%s)\n", rep.SoundServerError)
		return
	}
	fmt.Fprintf(w, "\nsound server: %s %s\n", srv.Name, srv.Version)
	section := func(title string, devs []portaudio.ServerDevice) {
		fmt.Fprintf(w, "\n%s\n", title)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tdescription\tname\tformat")
		for _, d := range devs {
			mark, kind := "", ""
			if d.Default {
				mark = "*"
			}
			if d.Monitor {
				kind = " (monitor)"
			}
			fmt.Fprintf(tw, "  %s\t%s%s\t%s\t%s %d ch %d Hz\n", mark, d.Description, kind, d.Name, d.Format, d.Channels, d.Rate)
		}
		if len(devs) == 0 {
			fmt.Fprintln(tw, "  \t(none)")
		}
		tw.Flush()
	}
	if inputs {
		section("sound server sources (* default)", srv.Sources)
	}
	if outputs {
		section("sound server sinks (* default)", srv.Sinks)
	}
}
