package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/pulsetest"
)

// TestDevicesListsSoundServer: 'agent devices' shows the sound server's sources and sinks
// by description under PortAudio's list, which has only ALSA's pulse and default.
func TestDevicesListsSoundServer(t *testing.T) {
	const (
		yeti    = "alsa_input.usb-Blue_Microphones_Yeti_Stereo_Microphone_REV8-00.analog-stereo"
		headset = "bluez_sink.38_18_4C_12_34_56.a2dp_sink"
	)
	srv := pulsetest.New(t)
	sink := srv.NullSink(t, headset, pulsetest.SinkOptions{Description: "WH-1000XM4 headset"})
	srv.VirtualSource(t, yeti, "Blue Yeti USB Mic", sink.Monitor)
	if err := srv.SetDefaultSink(context.Background(), headset); err != nil {
		t.Fatal(err)
	}
	run1 := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"--quiet"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("agent %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	out := run1("devices")
	for _, want := range []string{"sound server: pulseaudio", "sound server sources", "Blue Yeti USB Mic", yeti,
		"Monitor of WH-1000XM4 headset (monitor)", "sound server sinks", "WH-1000XM4 headset", headset, `--input "USB Mic"`} {
		if !strings.Contains(out, want) {
			t.Errorf("agent devices lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "output devices"), strings.Index(out, "sound server sources"); i < 0 || j < i {
		t.Errorf("the sound server is not listed under PortAudio's devices:\n%s", out)
	}
	if out := run1("devices", "--input"); strings.Contains(out, "sound server sinks") || !strings.Contains(out, "Blue Yeti USB Mic") {
		t.Errorf("agent devices --input:\n%s", out)
	}
	var rep devicesReport
	if err := json.Unmarshal([]byte(run1("devices", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.SoundServer == nil || len(rep.SoundServer.Sources) == 0 || len(rep.SoundServer.Sinks) == 0 {
		t.Fatalf("JSON report without the sound server's devices: %+v", rep)
	}
	var defaultSink string
	for _, d := range rep.SoundServer.Sinks {
		if d.Default {
			defaultSink = d.Name
		}
	}
	if defaultSink != headset {
		t.Errorf("default sink %q, want %q", defaultSink, headset)
	}
}

// TestDevicesWithoutSoundServer: without a server the PortAudio list still prints, with a
// line saying no sound server answered.
func TestDevicesWithoutSoundServer(t *testing.T) {
	pulsetest.New(t) // PortAudio probes through a server, then the client is sent nowhere
	t.Setenv("PULSE_SERVER", "unix:"+t.TempDir()+"/native")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--quiet", "devices"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "sound server: none answered") || !strings.Contains(stdout.String(), "input devices") {
		t.Fatalf("agent devices without a server:\n%s", stdout.String())
	}
}
