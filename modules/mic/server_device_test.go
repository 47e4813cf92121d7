package mic_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/mic"
)

// TestCapturesFromSoundServerSource names the microphone by part of the sound server's
// description ("USB Mic"), as --input and audio.input may: the module must record from
// that source, not the default one, and capture what it hears.
func TestCapturesFromSoundServerSource(t *testing.T) {
	const yeti = "alsa_input.usb-Blue_Microphones_Yeti_Stereo_Microphone_REV8-00.analog-stereo"
	speech := testenv.SharedFile(t, "audio/goforward.wav")
	want, err := audio.DecodeWAVFile(speech)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = audio.ToPipeline(want); err != nil {
		t.Fatal(err)
	}
	srv := pulsetest.New(t)
	ctx := context.Background()
	room := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 48000, Channels: 1})
	quiet := srv.NullSink(t, "quiet", pulsetest.SinkOptions{})
	srv.VirtualSource(t, yeti, "Blue Yeti USB Mic", room.Monitor) // the USB mic hears the room
	if err := srv.SetDefaultSource(ctx, quiet.Monitor); err != nil {
		t.Fatal(err)
	}
	l := startMic(t, mic.Config{Device: "USB Mic", Latency: 40 * time.Millisecond})
	frames := []audio.Frame{l.next(t, 10*time.Second)}
	recording, err := srv.RecordingFrom(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(recording, yeti) || slices.Contains(recording, quiet.Monitor) {
		t.Fatalf("recording streams use %v, want the microphone on %s", recording, yeti)
	}
	if err := srv.Play(ctx, room.Name, speech); err != nil {
		t.Fatal(err)
	}
	until := time.After(500 * time.Millisecond)
collect:
	for {
		select {
		case f := <-l.frames:
			frames = append(frames, f)
		case <-until:
			break collect
		}
	}
	l.cancel()
	if err := l.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for f := range l.frames {
		frames = append(frames, f)
	}
	got := checkFrames(t, frames, l.mic.Dropped() > 0)
	if _, corr := pulsetest.Find(got, want.Samples); corr < 0.9 {
		t.Fatalf("the speech played in the room is not in the capture of %q: best correlation %.3f", "USB Mic", corr)
	}
}
