package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/pulsetest"
)

func TestDevicesCommand(t *testing.T) {
	srv := pulsetest.New(t)
	srv.NullSink(t, "parley_cli", pulsetest.SinkOptions{})
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"tables", []string{"devices"}, func(t *testing.T, out string) {
			for _, want := range []string{"host APIs", "ALSA", "input devices", "output devices", "pulse", "names survive"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		}},
		{"inputs only", []string{"devices", "--input"}, func(t *testing.T, out string) {
			if !strings.Contains(out, "input devices") || strings.Contains(out, "output devices") {
				t.Errorf("--input output:\n%s", out)
			}
		}},
		{"json", []string{"devices", "--json"}, func(t *testing.T, out string) {
			var rep devicesReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var in, outDef bool
			for _, d := range rep.Devices {
				in = in || d.DefaultInput
				outDef = outDef || d.DefaultOutput
				if d.Name == "pulse" && (d.MaxOutputChannels == 0 || d.DefaultSampleRate == 0 || d.LowOutputMs <= 0) {
					t.Errorf("implausible pulse device %+v", d)
				}
			}
			if !in || !outDef || len(rep.HostAPIs) == 0 || rep.PortAudio == "" {
				t.Errorf("report lacks defaults or host APIs: %+v", rep)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), append([]string{"--quiet"}, tt.args...), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			tt.check(t, stdout.String())
		})
	}
}
