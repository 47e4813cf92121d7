package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/pulsetest"
)

// TestDoctorSaysWhatEchoCancelDecided: 'agent doctor' says whether a live session would
// cancel echo and why, from the sound server's default devices: not for a Bluetooth
// headset, yes for speakers.
func TestDoctorSaysWhatEchoCancelDecided(t *testing.T) {
	for _, tc := range []struct {
		sink, description string
		want              []string
	}{
		{"bluez_sink.38_18_4C_12_34_56.a2dp_sink", "WH-1000XM4 headset", []string{"auto → off", "looks like a headset", "WH-1000XM4", "echo canceller", "webrtc opens"}},
		{"alsa_output.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo", []string{"auto → on, engine webrtc", "Built-in Audio Analog Stereo", "may reach the microphone"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			srv := pulsetest.New(t)
			sink := srv.NullSink(t, tc.sink, pulsetest.SinkOptions{Description: tc.description})
			ctx := context.Background()
			if err := srv.SetDefaultSink(ctx, sink.Name); err != nil {
				t.Fatal(err)
			}
			if err := srv.SetDefaultSource(ctx, sink.Monitor); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PARLEY_CONFIG", "")
			var stdout, stderr bytes.Buffer
			run(ctx, []string{"--quiet", "doctor"}, &stdout, &stderr) // models may be missing: the exit code says so
			out := stdout.String()
			i := strings.Index(out, "echo cancellation")
			if i < 0 {
				t.Fatalf("agent doctor has no echo cancellation section:\n%s\n%s", out, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out[i:], w) {
					t.Errorf("agent doctor's echo cancellation section lacks %q:\n%s", w, out[i:])
				}
			}
		})
	}
}
