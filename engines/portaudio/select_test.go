package portaudio

import (
	"errors"
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	devs := []Info{
		{Index: 0, Name: "HDA Intel PCH: ALC257 Analog (hw:0,0)", HostAPI: "ALSA", MaxInputChannels: 2, MaxOutputChannels: 2},
		{Index: 1, Name: "HDA Intel PCH: HDMI 0 (hw:0,3)", HostAPI: "ALSA", MaxOutputChannels: 8},
		{Index: 2, Name: "USB Headset: Audio (hw:1,0)", HostAPI: "ALSA", MaxInputChannels: 1, MaxOutputChannels: 2},
		{Index: 3, Name: "pulse", HostAPI: "ALSA", MaxInputChannels: 32, MaxOutputChannels: 32},
		{Index: 4, Name: "default", HostAPI: "ALSA", MaxInputChannels: 32, MaxOutputChannels: 32, IsDefaultInput: true, IsDefaultOutput: true},
		{Index: 5, Name: "7", HostAPI: "ALSA", MaxInputChannels: 1},
		{Index: 6, Name: "Pulse Monitor", HostAPI: "JACK", MaxInputChannels: 2},
	}
	tests := []struct {
		name    string
		spec    string
		dir     Direction
		want    int
		wantErr error
		errHas  string
	}{
		{name: "default input", spec: "", dir: Input, want: 4},
		{name: "default output", spec: "", dir: Output, want: 4},
		{name: "exact name", spec: "pulse", dir: Output, want: 3},
		{name: "exact name beats substring", spec: "pulse", dir: Input, want: 3},
		{name: "exact name beats index", spec: "7", dir: Input, want: 5},
		{name: "index", spec: "2", dir: Input, want: 2},
		{name: "index with spaces", spec: " 2 ", dir: Output, want: 2},
		{name: "case-insensitive name", spec: "PULSE MONITOR", dir: Input, want: 6},
		{name: "substring", spec: "headset", dir: Input, want: 2},
		{name: "substring among output devices", spec: "hdmi", dir: Output, want: 1},
		{name: "index without direction", spec: "1", dir: Input, wantErr: ErrNotFound, errHas: "no input channels"},
		{name: "index out of range", spec: "42", dir: Input, wantErr: ErrNotFound, errHas: "no device with index 42"},
		{name: "substring of no device", spec: "bluetooth", dir: Output, wantErr: ErrNotFound, errHas: `"pulse"`},
		{name: "substring without direction", spec: "hdmi", dir: Input, wantErr: ErrNotFound},
		{name: "ambiguous substring", spec: "hda intel", dir: Output, wantErr: ErrAmbiguous, errHas: "HDMI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(devs, tt.spec, tt.dir)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Select(%q, %v) = %v, %v; want error %v", tt.spec, tt.dir, got.Name, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("error %q does not mention %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Select(%q, %v): %v", tt.spec, tt.dir, err)
			}
			if got.Index != tt.want {
				t.Fatalf("Select(%q, %v) = %d %q, want %d", tt.spec, tt.dir, got.Index, got.Name, tt.want)
			}
		})
	}
}

func TestSelectNoDevices(t *testing.T) {
	_, err := Select(nil, "", Output)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no output devices at all") {
		t.Fatalf("got %v", err)
	}
}
