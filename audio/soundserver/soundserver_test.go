package soundserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/pulsetest"
)

// What PulseAudio 17's pactl printed for a null sink and module-echo-cancel.
const (
	infoJSON    = `{"server_string":"unix:/tmp/x/native","server_name":"pulseaudio","server_version":"17.0","default_sink_name":"room","default_source_name":"room.monitor.echo-cancel","cookie":"590d:afe9"}`
	sourcesJSON = `[{"index":0,"state":"IDLE","name":"room.monitor","description":"Monitor of room","properties":{"device.description":"Monitor of room","device.class":"monitor","device.icon_name":"audio-input-microphone"},"ports":[],"active_port":null,"formats":["pcm"]},` +
		`{"index":2,"name":"room.monitor.echo-cancel","description":"Monitor of room (echo cancelled with agent_out)","properties":{"device.master_device":"room.monitor","device.class":"filter","device.intended_roles":"phone"},"volume":{"mono":{"value":65536}}}]`
)

func TestParse(t *testing.T) {
	server, sink, source, err := ParseInfo([]byte(infoJSON))
	if err != nil || server != "pulseaudio 17.0" || sink != "room" || source != "room.monitor.echo-cancel" {
		t.Fatalf("ParseInfo = %q %q %q %v", server, sink, source, err)
	}
	devs, err := ParseDevices([]byte(sourcesJSON))
	if err != nil || len(devs) != 2 {
		t.Fatalf("ParseDevices = %+v, %v", devs, err)
	}
	if d := devs[1]; d.Name != "room.monitor.echo-cancel" || d.Properties["device.class"] != "filter" || d.Description == "" {
		t.Errorf("device %+v", d)
	}
	for _, bad := range []string{"", "{", `{"server_name": 3}`} {
		if _, _, _, err := ParseInfo([]byte(bad)); err == nil {
			t.Errorf("ParseInfo(%q) accepted", bad)
		}
	}
	if _, err := ParseDevices([]byte(`{"name":"x"}`)); err == nil {
		t.Error("ParseDevices accepted an object")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(infoJSON))
	f.Add([]byte(sourcesJSON))
	f.Add([]byte(`[{"properties":{"a":[1,{"b":null}]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseInfo(data)
		devs, err := ParseDevices(data)
		if err == nil {
			for _, d := range devs {
				if d.Properties == nil {
					t.Fatal("nil properties")
				}
			}
		}
	})
}

// TestQuery asks a real PulseAudio server with module-echo-cancel loaded.
func TestQuery(t *testing.T) {
	srv := pulsetest.New(t)
	ctx := context.Background()
	srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 16000, Channels: 1})
	srv.NullSink(t, "agent_out", pulsetest.SinkOptions{Rate: 48000, Channels: 2})
	if _, err := srv.Pactl(ctx, "load-module", "module-echo-cancel", "source_master=room.monitor", "sink_master=agent_out"); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSink(ctx, "agent_out"); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSource(ctx, "room.monitor.echo-cancel"); err != nil {
		t.Fatal(err)
	}
	info, err := Query(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", info)
	if info.DefaultSink.Name != "agent_out" || info.DefaultSink.Description != "agent_out" ||
		info.DefaultSource.Name != "room.monitor.echo-cancel" || info.DefaultSource.Properties["device.class"] != "filter" ||
		!strings.HasPrefix(info.Server, "pulseaudio") {
		t.Errorf("Query = %+v", info)
	}
}

func TestQueryWithoutServer(t *testing.T) {
	t.Setenv("PULSE_SERVER", "unix:/nonexistent/native")
	t.Setenv("PULSE_CLIENTCONFIG", "/dev/null")
	_, err := Query(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Query without a server: %v", err)
	}
}
