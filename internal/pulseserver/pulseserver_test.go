package pulseserver_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulseserver"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestPlayRecord plays a tone into a null sink and finds it in the sink's monitor.
func TestPlayRecord(t *testing.T) {
	srv := pulsetest.New(t)
	ctx := context.Background()
	sink := srv.NullSink(t, "parley_test", pulseserver.SinkOptions{Rate: 48000, Channels: 2})
	if got := os.Getenv("PULSE_SERVER"); got != srv.Address() {
		t.Fatalf("PULSE_SERVER = %q, want %q", got, srv.Address())
	}
	out, err := srv.Pactl(ctx, "list", "short", "sinks")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, sink.Name) {
		t.Fatalf("sink %s not listed: %q", sink.Name, out)
	}

	dir := t.TempDir()
	tone := audio.Frame{Rate: 16000, Channels: 1, Samples: make([]float32, 16000/2)}
	for i := range tone.Samples {
		tone.Samples[i] = 0.5 * float32(math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	tonePath := filepath.Join(dir, "tone.wav")
	if err := audio.WriteWAVFile(tonePath, tone, 16); err != nil {
		t.Fatal(err)
	}
	recPath := filepath.Join(dir, "rec.wav")
	rec, err := srv.Record(ctx, sink.Monitor, recPath, pulseserver.RecordOptions{Rate: 16000})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Play(ctx, sink.Name, tonePath); err != nil {
		t.Fatal(err)
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	got, err := audio.DecodeWAVFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rate != 16000 || got.Channels != 1 {
		t.Fatalf("recording is %d Hz x%d", got.Rate, got.Channels)
	}
	// The tone's RMS is 0.5/√2; the loudest 100 ms of the recording must carry it.
	best := 0.0
	for i := 0; i+1600 <= len(got.Samples); i += 800 {
		best = math.Max(best, audio.RMS(got.Samples[i:i+1600]))
	}
	if want := 0.5 / math.Sqrt2; math.Abs(best-want) > 0.05 {
		t.Fatalf("loudest 100 ms of the monitor recording has RMS %.3f, want about %.3f (recording: %v)", best, want, got.Duration())
	}
}

// TestKill checks that Kill ends the daemon, that Close afterwards is harmless, and that
// clients then fail instead of spawning another daemon.
func TestKill(t *testing.T) {
	srv := pulsetest.New(t)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("daemon still running after Kill")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Pactl(context.Background(), "info"); err == nil {
		t.Fatal("pactl info succeeded after the daemon was killed")
	}
}

// TestStartWithoutTestHelper starts a server the way non-test code does.
func TestStartWithoutTestHelper(t *testing.T) {
	srv, err := pulseserver.Start(context.Background(), t.TempDir(), pulseserver.Options{})
	if err != nil {
		if errors.Is(err, pulseserver.ErrNotInstalled) {
			testenv.Missing(t, "pulseaudio", testenv.EnvFix)
		}
		t.Fatal(err)
	}
	defer srv.Close()
	restore := srv.ApplyEnv()
	defer restore()
	if got := os.Getenv("PULSE_SERVER"); got != srv.Address() {
		t.Fatalf("PULSE_SERVER = %q after ApplyEnv", got)
	}
	if _, err := srv.LoadNullSink(context.Background(), "x", pulseserver.SinkOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	restore()
}
