package pulse_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/pulse"
	"github.com/parley-voice/parley/internal/pulsetest"
)

// Devices named and described the way real ones are.
const (
	yetiName  = "alsa_input.usb-Blue_Microphones_Yeti_Stereo_Microphone_REV8-00.analog-stereo"
	yetiDesc  = "Blue Yeti USB Mic"
	headName  = "bluez_sink.38_18_4C_12_34_56.a2dp_sink"
	headDesc  = "WH-1000XM4 headset"
	speakName = "alsa_output.pci-0000_00_1f.3.analog-stereo"
	speakDesc = "Built-in Audio Analog Stereo"
)

// devices starts a server with a headset and built-in speakers (null sinks) and a USB
// microphone (a virtual source carrying the speakers' monitor).
func devices(t *testing.T) *pulsetest.Server {
	t.Helper()
	srv := pulsetest.New(t)
	srv.NullSink(t, headName, pulsetest.SinkOptions{Description: headDesc, Rate: 48000, Channels: 2})
	speakers := srv.NullSink(t, speakName, pulsetest.SinkOptions{Description: speakDesc, Rate: 44100, Channels: 2})
	srv.VirtualSource(t, yetiName, yetiDesc, speakers.Monitor)
	ctx := context.Background()
	if err := srv.SetDefaultSink(ctx, headName); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSource(ctx, yetiName); err != nil {
		t.Fatal(err)
	}
	return srv
}

func byName(devs []pulse.Device, name string) (pulse.Device, bool) {
	for _, d := range devs {
		if d.Name == name {
			return d, true
		}
	}
	return pulse.Device{}, false
}

func TestListDevices(t *testing.T) {
	srv := devices(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		server string
	}{
		{"PULSE_SERVER from the environment", ""},
		{"explicit server", srv.Address()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := pulse.Connect(ctx, pulse.Options{Server: tt.server})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, err := c.ServerInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.DefaultSink != headName || info.DefaultSource != yetiName || info.Name == "" || info.Version == "" {
				t.Errorf("server info %+v", info)
			}
			sinks, err := c.Sinks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			head, ok := byName(sinks, headName)
			if !ok || head.Description != headDesc || !head.Default || head.IsMonitor() ||
				head.SampleSpec != (pulse.SampleSpec{Format: "s16le", Rate: 48000, Channels: 2}) {
				t.Errorf("headset sink %+v (found %v) in %+v", head, ok, sinks)
			}
			speak, ok := byName(sinks, speakName)
			if !ok || speak.Description != speakDesc || speak.Default || speak.SampleSpec.Rate != 44100 {
				t.Errorf("speaker sink %+v (found %v)", speak, ok)
			}
			sources, err := c.Sources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			yeti, ok := byName(sources, yetiName)
			if !ok || yeti.Description != yetiDesc || !yeti.Default || yeti.IsMonitor() {
				t.Errorf("USB mic source %+v (found %v) in %+v", yeti, ok, sources)
			}
			mon, ok := byName(sources, headName+".monitor")
			if !ok || mon.MonitorOf != headName || !mon.IsMonitor() || mon.Default {
				t.Errorf("headset monitor %+v (found %v)", mon, ok)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := c.Sinks(ctx); !errors.Is(err, pulse.ErrClosed) {
				t.Fatalf("Sinks after Close: %v", err)
			}
		})
	}
}

// TestNoServer: without a server Connect fails with ErrNoServer, and never starts one.
func TestNoServer(t *testing.T) {
	_, err := pulse.Connect(context.Background(), pulse.Options{Server: "unix:" + filepath.Join(t.TempDir(), "native")})
	if !errors.Is(err, pulse.ErrNoServer) {
		t.Fatalf("Connect without a server: %v", err)
	}
}

// silentServer accepts connections and never answers, like a wedged sound server.
func silentServer(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "native")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return "unix:" + path
}

func TestServerThatDoesNotAnswer(t *testing.T) {
	addr := silentServer(t)
	t.Run("timeout", func(t *testing.T) {
		_, err := pulse.Connect(context.Background(), pulse.Options{Server: addr, Timeout: 200 * time.Millisecond})
		if !errors.Is(err, pulse.ErrNoServer) {
			t.Fatalf("Connect to a silent server: %v", err)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := pulse.Connect(ctx, pulse.Options{Server: addr, Timeout: time.Hour})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Connect cancelled: %v", err)
		}
	})
}
