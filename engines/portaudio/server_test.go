package portaudio_test

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/internal/pulsetest"
)

// Named and described the way real devices are.
const (
	yetiName     = "alsa_input.usb-Blue_Microphones_Yeti_Stereo_Microphone_REV8-00.analog-stereo"
	yetiDesc     = "Blue Yeti USB Mic"
	headsetName  = "bluez_sink.38_18_4C_12_34_56.a2dp_sink"
	headsetDesc  = "WH-1000XM4 headset"
	speakersName = "alsa_output.pci-0000_00_1f.3.analog-stereo"
	speakersDesc = "Built-in Audio Analog Stereo"
)

// laptop starts a server with a headset and built-in speakers (null sinks) and a USB
// microphone that hears the speakers (a virtual source on their monitor). The defaults
// are elsewhere: the headset, and the monitor of a sink nothing plays on, so a stream
// that is not directed where it was asked to go plays or records in the wrong place.
func laptop(t *testing.T) *pulsetest.Server {
	t.Helper()
	srv := pulsetest.New(t)
	srv.NullSink(t, headsetName, pulsetest.SinkOptions{Description: headsetDesc, Rate: 48000, Channels: 2})
	speakers := srv.NullSink(t, speakersName, pulsetest.SinkOptions{Description: speakersDesc, Rate: 48000, Channels: 2})
	quiet := srv.NullSink(t, "quiet", pulsetest.SinkOptions{Description: "Nothing plays here"})
	srv.VirtualSource(t, yetiName, yetiDesc, speakers.Monitor)
	ctx := context.Background()
	if err := srv.SetDefaultSink(ctx, headsetName); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSource(ctx, quiet.Monitor); err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestQuerySoundServer(t *testing.T) {
	laptop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := portaudio.QuerySoundServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	find := func(devs []portaudio.ServerDevice, name string) portaudio.ServerDevice {
		i := slices.IndexFunc(devs, func(d portaudio.ServerDevice) bool { return d.Name == name })
		if i < 0 {
			t.Fatalf("%s not in %+v", name, devs)
		}
		return devs[i]
	}
	if d := find(srv.Sources, yetiName); d.Description != yetiDesc || d.Monitor || d.Default {
		t.Errorf("USB mic %+v", d)
	}
	if d := find(srv.Sources, "quiet.monitor"); !d.Monitor || !d.Default {
		t.Errorf("default monitor %+v", d)
	}
	if d := find(srv.Sinks, headsetName); d.Description != headsetDesc || !d.Default || d.Rate != 48000 || d.Channels != 2 {
		t.Errorf("headset %+v", d)
	}
	if srv.Name == "" || srv.Version == "" {
		t.Errorf("server %q %q", srv.Name, srv.Version)
	}
}

// TestStreamsOnServerDevices opens a capture stream on "USB Mic" and a playback stream on
// "Built-in Audio", by part of their descriptions: the server must show the streams on
// that source and sink, and the tone played on the speakers must arrive through the USB
// microphone (which hears them), while the defaults are elsewhere.
func TestStreamsOnServerDevices(t *testing.T) {
	srv := laptop(t)
	h := openHost(t)
	inDev, err := h.Find("USB Mic", portaudio.Input)
	if err != nil {
		t.Fatal(err)
	}
	outDev, err := h.Find("built-in audio", portaudio.Output)
	if err != nil {
		t.Fatal(err)
	}
	if inDev.Name != "pulse" || inDev.ServerDevice == nil || inDev.ServerDevice.Name != yetiName {
		t.Fatalf("Find(USB Mic) = %+v", inDev)
	}
	if outDev.Name != "pulse" || outDev.ServerDevice == nil || outDev.ServerDevice.Name != speakersName {
		t.Fatalf("Find(built-in audio) = %+v", outDev)
	}

	const rate = 48000
	var phase int64 // owned by the output callback
	out, err := h.OpenOutput(portaudio.StreamConfig{Device: outDev, SampleRate: rate, Channels: 1, Latency: 100 * time.Millisecond},
		func(buf []float32, frames int, _ portaudio.Timing, _ portaudio.Flags) {
			for i := range frames {
				buf[i] = float32(0.5 * math.Sin(2*math.Pi*1000*float64(phase)/rate))
				phase++
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var loud, blocks atomic.Int64
	in, err := h.OpenInput(portaudio.StreamConfig{Device: inDev, SampleRate: rate, Channels: 1, Latency: 100 * time.Millisecond},
		func(buf []float32, frames int, _ portaudio.Timing, _ portaudio.Flags) {
			var s float64
			for _, v := range buf[:frames] {
				s += float64(v) * float64(v)
			}
			blocks.Add(1)
			if math.Sqrt(s/float64(max(frames, 1))) > 0.1 {
				loud.Add(1)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, name := range []string{"PULSE_SOURCE", "PULSE_SINK"} {
		if v, ok := os.LookupEnv(name); ok {
			t.Errorf("%s=%q left in the environment after the streams opened", name, v)
		}
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if err := out.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	recording, err := srv.RecordingFrom(ctx)
	if err != nil {
		t.Fatal(err)
	}
	playing, err := srv.PlayingTo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The virtual source itself records from the speakers' monitor.
	if !slices.Contains(recording, yetiName) || slices.Contains(recording, "quiet.monitor") {
		t.Errorf("recording streams use %v, want one on %s and none on the default source", recording, yetiName)
	}
	if !slices.Equal(playing, []string{speakersName}) {
		t.Errorf("playback streams use %v, want %s only", playing, speakersName)
	}
	deadline := time.Now().Add(10 * time.Second)
	for loud.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if loud.Load() < 20 {
		t.Fatalf("the tone played on the speakers did not arrive through the USB mic: %d of %d capture blocks loud", loud.Load(), blocks.Load())
	}
}

// TestFindWithoutSoundServer: a name that no PortAudio device has fails with an error
// that says the sound server could not be asked, and comes back within the query's bound.
func TestFindWithoutSoundServer(t *testing.T) {
	laptop(t) // PortAudio scans through the server; then the client goes nowhere
	h := openHost(t)
	t.Setenv("PULSE_SERVER", "unix:"+t.TempDir()+"/native")
	_, err := h.Find("USB Mic", portaudio.Input)
	if err == nil || !strings.Contains(err.Error(), "no input device named or containing") ||
		!strings.Contains(err.Error(), "sound server's devices were not searched") {
		t.Fatalf("Find without a server: %v", err)
	}
}
