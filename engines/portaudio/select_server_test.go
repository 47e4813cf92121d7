package portaudio

import (
	"errors"
	"strings"
	"testing"
)

// Named and described as a laptop with a USB microphone and a Bluetooth headset shows
// them through PulseAudio.
var (
	laptopDevs = []Info{
		{Index: 0, Name: "HDA Intel PCH: ALC257 Analog (hw:0,0)", HostAPI: "ALSA", MaxInputChannels: 2, MaxOutputChannels: 2},
		{Index: 1, Name: "USB Audio Device: - (hw:1,0)", HostAPI: "ALSA", MaxInputChannels: 1, MaxOutputChannels: 2},
		{Index: 2, Name: "pulse", HostAPI: "ALSA", MaxInputChannels: 32, MaxOutputChannels: 32},
		{Index: 3, Name: "default", HostAPI: "ALSA", MaxInputChannels: 32, MaxOutputChannels: 32, IsDefaultInput: true, IsDefaultOutput: true},
	}
	laptopSources = []ServerDevice{
		{Name: "alsa_input.usb-Blue_Microphones_Yeti_Stereo_Microphone_REV8-00.analog-stereo", Description: "Blue Yeti USB Mic"},
		{Name: "alsa_input.pci-0000_00_1f.3.analog-stereo", Description: "Built-in Audio Analog Stereo", Default: true},
		{Name: "bluez_source.38_18_4C_12_34_56.handsfree_head_unit", Description: "WH-1000XM4 headset"},
		{Name: "bluez_sink.38_18_4C_12_34_56.a2dp_sink.monitor", Description: "Monitor of WH-1000XM4 headset", Monitor: true},
		{Name: "alsa_output.pci-0000_00_1f.3.analog-stereo.monitor", Description: "Monitor of Built-in Audio Analog Stereo", Monitor: true},
	}
	laptopSinks = []ServerDevice{
		{Name: "bluez_sink.38_18_4C_12_34_56.a2dp_sink", Description: "WH-1000XM4 headset"},
		{Name: "alsa_output.pci-0000_00_1f.3.analog-stereo", Description: "Built-in Audio Analog Stereo", Default: true},
	}
)

func TestSelectFromSoundServer(t *testing.T) {
	twins := append([]ServerDevice{{Name: "alsa_input.usb-second", Description: "Blue Yeti USB Mic"}}, laptopSources...)
	noPulse := []Info{laptopDevs[0], laptopDevs[1], laptopDevs[3]}
	tests := []struct {
		name       string
		devs       []Info
		server     []ServerDevice
		spec       string
		dir        Direction
		wantDevice string // the PortAudio device
		wantServer string // the source or sink it is directed to ("" for none)
		wantErr    error
		errHas     []string
	}{
		{name: "part of a description", spec: "USB Mic", dir: Input, wantDevice: "pulse", wantServer: laptopSources[0].Name},
		{name: "description ignoring case", spec: "blue yeti usb mic", dir: Input, wantDevice: "pulse", wantServer: laptopSources[0].Name},
		{name: "exact server name", spec: laptopSources[0].Name, dir: Input, wantDevice: "pulse", wantServer: laptopSources[0].Name},
		{name: "part of a server name", spec: "bluez_sink.38", dir: Output, wantDevice: "pulse", wantServer: laptopSinks[0].Name},
		{name: "headset microphone, not its monitor", spec: "WH-1000XM4", dir: Input, wantDevice: "pulse", wantServer: laptopSources[2].Name},
		{name: "headset", spec: "WH-1000XM4", dir: Output, wantDevice: "pulse", wantServer: laptopSinks[0].Name},
		{name: "a monitor when only monitors match", spec: "monitor of wh", dir: Input, wantDevice: "pulse", wantServer: laptopSources[3].Name},
		{name: "equal description beats parts", spec: "Built-in Audio Analog Stereo", dir: Input, wantDevice: "pulse", wantServer: laptopSources[1].Name},
		{name: "PortAudio name first", spec: "pulse", dir: Input, wantDevice: "pulse"},
		{name: "PortAudio part of a name", spec: "ALC257", dir: Output, wantDevice: laptopDevs[0].Name},
		{name: "index", spec: "1", dir: Input, wantDevice: laptopDevs[1].Name},
		{name: "default stays PortAudio's", spec: "", dir: Output, wantDevice: "default"},
		{name: "PortAudio and server devices both match", spec: "usb", dir: Input, wantErr: ErrAmbiguous,
			errHas: []string{"USB Audio Device", "Blue_Microphones_Yeti", "sound server sources"}},
		{name: "two sources described alike", server: twins, spec: "Blue Yeti USB Mic", dir: Input, wantErr: ErrAmbiguous,
			errHas: []string{"alsa_input.usb-second", "Blue_Microphones_Yeti", "use the name"}},
		{name: "nothing matches", spec: "AirPods", dir: Output, wantErr: ErrNotFound,
			errHas: []string{`"pulse" (ALSA)`, "sound server sinks", "(WH-1000XM4 headset)", "(Built-in Audio Analog Stereo)"}},
		{name: "no pulse device to reach the server", devs: noPulse, spec: "USB Mic", dir: Input, wantErr: ErrNotFound,
			errHas: []string{"no ALSA \"pulse\" device", "libasound2-plugins"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs, server := tt.devs, tt.server
			if devs == nil {
				devs = laptopDevs
			}
			if server == nil {
				server = laptopSinks
				if tt.dir == Input {
					server = laptopSources
				}
			}
			got, err := SelectFrom(devs, server, tt.spec, tt.dir)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("SelectFrom(%q) = %+v, %v; want %v", tt.spec, got, err, tt.wantErr)
				}
				for _, want := range tt.errHas {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("SelectFrom(%q): %v", tt.spec, err)
			}
			var routed string
			if got.ServerDevice != nil {
				routed = got.ServerDevice.Name
			}
			if got.Name != tt.wantDevice || routed != tt.wantServer {
				t.Fatalf("SelectFrom(%q) = %q directed to %q; want %q directed to %q", tt.spec, got.Name, routed, tt.wantDevice, tt.wantServer)
			}
		})
	}
}

// FuzzSelectFrom: any spec either picks a usable device (directed only through "pulse")
// or fails with ErrNotFound or ErrAmbiguous.
func FuzzSelectFrom(f *testing.F) {
	for _, s := range []string{"", "USB Mic", "usb", "2", "pulse", "monitor", "WH-1000XM4", "Blue Yeti USB Mic"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, spec string, input bool) {
		dir, server := Output, laptopSinks
		if input {
			dir, server = Input, laptopSources
		}
		got, err := SelectFrom(laptopDevs, server, spec, dir)
		if err != nil {
			if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrAmbiguous) {
				t.Fatalf("SelectFrom(%q): unexpected error %v", spec, err)
			}
			return
		}
		if !got.Has(dir) || (got.ServerDevice != nil && got.Name != "pulse") {
			t.Fatalf("SelectFrom(%q) = %+v", spec, got)
		}
	})
}
