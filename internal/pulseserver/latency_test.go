package pulseserver_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulseserver"
	"github.com/parley-voice/parley/internal/pulsetest"
)

// TestLatencies: while a file plays into a null sink and its monitor is recorded, the
// server reports both streams, on the right devices, with the buffering they asked for.
func TestLatencies(t *testing.T) {
	srv := pulsetest.New(t)
	ctx := context.Background()
	sink := srv.NullSink(t, "lat_test", pulseserver.SinkOptions{Rate: 16000, Channels: 1})
	dir := t.TempDir()
	silence := filepath.Join(dir, "silence.wav")
	if err := audio.WriteWAVFile(silence, audio.Frame{Rate: 16000, Channels: 1, Samples: make([]float32, 3*16000)}, 16); err != nil {
		t.Fatal(err)
	}
	rec, err := srv.Record(ctx, sink.Monitor, filepath.Join(dir, "rec.wav"), pulseserver.RecordOptions{Rate: 16000})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	play, err := srv.StartPlay(ctx, sink.Name, silence)
	if err != nil {
		t.Fatal(err)
	}
	defer play.Stop()
	time.Sleep(time.Second) // both streams are running

	l, err := srv.Latencies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var playing, recording *pulseserver.StreamLatency
	for i, s := range l.Streams {
		switch {
		case s.Playback && s.Device == sink.Name:
			playing = &l.Streams[i]
		case !s.Playback && s.Device == sink.Monitor:
			recording = &l.Streams[i]
		}
	}
	if playing == nil || recording == nil {
		t.Fatalf("streams %+v: want paplay on %s and parecord on %s", l.Streams, sink.Name, sink.Monitor)
	}
	// paplay asks for 200 ms; the server keeps most of it buffered.
	if playing.Buffer < 20*time.Millisecond || playing.Total() > 400*time.Millisecond {
		t.Errorf("paplay's stream: %+v, want some of its 200 ms buffered", *playing)
	}
	if recording.Total() > 200*time.Millisecond {
		t.Errorf("parecord's stream (10 ms asked): %+v", *recording)
	}
	found := false
	for _, d := range l.Devices {
		if d.Sink && d.Name == sink.Name {
			found = true
			if d.Configured <= 0 {
				t.Errorf("sink %+v has no configured latency", d)
			}
		}
	}
	if !found {
		t.Errorf("devices %+v: no sink %s", l.Devices, sink.Name)
	}
}

func TestParseLatencies(t *testing.T) {
	sinks := `[{"index":1,"name":"out","latency":{"actual":1854.00,"configured":20000.00}}]`
	sources := `[{"index":2,"name":"out.monitor","latency":{"actual":0.00,"configured":20000.00}}]`
	inputs := `[{"index":0,"sink":1,"buffer_latency_usec":150520.00,"sink_latency_usec":11940.00,"properties":{"application.name":"paplay","media.name":"a.wav"}}]`
	outputs := `[{"index":3,"source":2,"buffer_latency_usec":227.00,"source_latency_usec":0.00,"properties":{}},{"index":4,"source":9,"buffer_latency_usec":1,"source_latency_usec":2}]`
	l, err := pulseserver.ParseLatencies([]byte(sinks), []byte(sources), []byte(inputs), []byte(outputs))
	if err != nil {
		t.Fatal(err)
	}
	want := []pulseserver.StreamLatency{
		{Playback: true, Index: 0, Device: "out", Application: "paplay", Media: "a.wav", Buffer: 150520 * time.Microsecond, DeviceLatency: 11940 * time.Microsecond},
		{Index: 3, Device: "out.monitor", Buffer: 227 * time.Microsecond},
		{Index: 4, Device: "#9", Buffer: time.Microsecond, DeviceLatency: 2 * time.Microsecond},
	}
	if len(l.Streams) != len(want) {
		t.Fatalf("streams %+v, want %+v", l.Streams, want)
	}
	for i := range want {
		if l.Streams[i] != want[i] {
			t.Errorf("stream %d: %+v, want %+v", i, l.Streams[i], want[i])
		}
	}
	if len(l.Devices) != 2 || l.Devices[0] != (pulseserver.DeviceLatency{Sink: true, Name: "out", Actual: 1854 * time.Microsecond, Configured: 20 * time.Millisecond}) {
		t.Errorf("devices %+v", l.Devices)
	}
	for _, bad := range [][4]string{
		{`{`, `[]`, `[]`, `[]`},
		{`[]`, `[]`, `[{"buffer_latency_usec":-1}]`, `[]`},
		{`[{"latency":{"actual":1e300}}]`, `[]`, `[]`, `[]`},
		{`[]`, `[]`, `[]`, `"x"`},
	} {
		if _, err := pulseserver.ParseLatencies([]byte(bad[0]), []byte(bad[1]), []byte(bad[2]), []byte(bad[3])); err == nil {
			t.Errorf("ParseLatencies%q: no error", bad)
		}
	}
}

func FuzzParseLatencies(f *testing.F) {
	f.Add([]byte(`[{"index":1,"name":"out","latency":{"actual":1854.00,"configured":20000.00}}]`),
		[]byte(`[{"index":0,"sink":1,"buffer_latency_usec":150520.00,"sink_latency_usec":11940.00,"properties":{"application.name":"paplay"}}]`))
	f.Fuzz(func(t *testing.T, devices, streams []byte) {
		l, err := pulseserver.ParseLatencies(devices, devices, streams, streams)
		if err != nil {
			return
		}
		for _, s := range l.Streams {
			if s.Buffer < 0 || s.DeviceLatency < 0 {
				t.Fatalf("negative latency %+v", s)
			}
		}
	})
}
