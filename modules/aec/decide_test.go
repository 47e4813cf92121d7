package aec

import (
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Auto, "auto": Auto, " AUTO ": Auto, "on": On, "true": On, "yes": On, "off": Off, "false": Off, "No": Off} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil {
		t.Error("ParseMode accepted sometimes")
	}
}

func TestDecide(t *testing.T) {
	speakers := Device{Names: []string{"pulse", "alsa_output.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo"}}
	mic := Device{Names: []string{"pulse", "alsa_input.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo"}}
	for _, tc := range []struct {
		name   string
		mode   Mode
		d      Devices
		on     bool
		reason string
	}{
		{name: "laptop speakers", mode: Auto, d: Devices{Output: speakers, Input: mic}, on: true, reason: "may reach the microphone"},
		{name: "nothing known", mode: Auto, on: true, reason: "the output may reach"},
		{name: "forced on", mode: On, d: Devices{Output: Device{Names: []string{"USB Headset"}}}, on: true, reason: "is on"},
		{name: "forced off", mode: Off, d: Devices{Output: speakers}, on: false, reason: "is off"},
		{name: "USB headset by name", mode: Auto, d: Devices{Output: Device{Names: []string{"Logitech USB Headset H340: Audio (hw:2,0)"}}}, on: false, reason: "headset"},
		{name: "Sony WH-1000XM4", mode: Auto, d: Devices{Output: Device{Names: []string{"pulse", "bluez_output.38_18_4C_00_00_00.1", "WH-1000XM4"}}}, on: false, reason: "wh-"},
		{name: "AirPods", mode: Auto, d: Devices{Output: Device{Names: []string{"pipewire", "Jane's AirPods Pro"}}}, on: false, reason: "airpods"},
		{name: "Bluetooth hands-free profile", mode: Auto, d: Devices{Output: Device{Names: []string{"bluez_sink.00_11_22_33_44_55.handsfree_head_unit"}}}, on: false, reason: "hands"},
		{name: "USB headphones", mode: Auto, d: Devices{Output: Device{Names: []string{"pulse", "alsa_output.usb-Sennheiser_HD_Headphones", "HD Headphones Analog Stereo"}}}, on: false, reason: "headphone"},
		{name: "bluetooth speaker", mode: Auto, d: Devices{Output: Device{Names: []string{"pulse", "bluez_output.x.a2dp-sink", "JBL Flip 5"}}}, on: true},
		{name: "PulseAudio echo-cancel source", mode: Auto, d: Devices{Output: speakers, Input: Device{
			Names: []string{"pulse", "alsa_input.pci.analog-stereo.echo-cancel", "Built-in Audio (echo cancelled with Built-in Audio)"}}}, on: false, reason: "already cancels"},
		{name: "PipeWire echo-cancel source", mode: Auto, d: Devices{Output: speakers, Input: Device{Names: []string{"pipewire", "echo-cancel-source", "Echo-Cancel Source"}}}, on: false, reason: "already cancels"},
		{name: "monitor of an echo-cancel sink", mode: Auto, d: Devices{Output: speakers, Input: Device{
			Names: []string{"pulse", "out.echo-cancel.monitor", "Monitor of out (echo cancelled with mic)"}, Monitor: true}}, on: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.mode, tc.d)
			if d.On != tc.on || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("Decide = %v, want on %v because of %q", d, tc.on, tc.reason)
			}
		})
	}
}

func TestDecideReplay(t *testing.T) {
	for _, tc := range []struct {
		mode      Mode
		simulated bool
		on        bool
	}{{Auto, true, true}, {Auto, false, false}, {On, false, true}, {Off, true, false}} {
		if d := DecideReplay(tc.mode, tc.simulated); d.On != tc.on || d.Reason == "" {
			t.Errorf("DecideReplay(%s, %v) = %v", tc.mode, tc.simulated, d)
		}
	}
}
