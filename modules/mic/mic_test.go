package mic_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/internal/pulseserver"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/mic"
	"go.uber.org/zap/zaptest"
)

// collector hands every audio frame it receives to frames.
func collector(frames chan<- audio.Frame) iu.Module {
	return iu.ModuleFunc{ModuleName: "collector", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventInputDone:
				close(frames)
				return nil
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					if f, ok := up.IU.Payload.(audio.Frame); ok && up.Type == iu.Add {
						frames <- f
					}
				}
			}
		}
	}}
}

// live runs a microphone into a collector on the real clock.
type live struct {
	mic    *mic.Mic
	frames chan audio.Frame
	cancel context.CancelFunc
	done   chan struct{} // closed when the network returned err
	err    error
}

// wait waits for the network to return and returns its error.
func (l *live) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-l.done:
		return l.err
	case <-time.After(timeout):
		t.Fatalf("the network still runs after %v", timeout)
	}
	return nil
}

func startMic(t *testing.T, cfg mic.Config) *live {
	t.Helper()
	m, err := mic.New("mic", cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &live{mic: m, frames: make(chan audio.Frame, 100000), done: make(chan struct{})}
	coll := collector(l.frames)
	net := iu.NewNetwork(iu.WithLogger(zaptest.NewLogger(t)))
	if err := net.Add(m, coll); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(m, coll); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() {
		l.err = net.Run(ctx)
		close(l.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// next waits for the next frame.
func (l *live) next(t *testing.T, timeout time.Duration) audio.Frame {
	t.Helper()
	select {
	case f, ok := <-l.frames:
		if !ok {
			t.Fatal("the microphone stopped")
		}
		return f
	case <-time.After(timeout):
		t.Fatalf("no audio frame within %v", timeout)
	}
	return audio.Frame{}
}

// checkFrames checks the pipeline format and that Start positions are contiguous.
func checkFrames(t *testing.T, frames []audio.Frame, allowGaps bool) []float32 {
	t.Helper()
	var all []float32
	for i, f := range frames {
		if f.Rate != audio.PipelineRate || f.Channels != 1 || f.Len() == 0 {
			t.Fatalf("frame %d: %s, want %d Hz mono", i, f.Summary(), audio.PipelineRate)
		}
		if i > 0 {
			prev := frames[i-1]
			if f.Start < prev.End() || (!allowGaps && f.Start != prev.End()) {
				t.Fatalf("frame %d starts at %d, the previous ended at %d", i, f.Start, prev.End())
			}
			for range f.Start - prev.End() {
				all = append(all, 0)
			}
		}
		all = append(all, f.Samples...)
	}
	return all
}

// checkCaptured checks the frames' capture times: set, in the past, and following the
// stream positions (the device's clock), give or take the timing's jitter.
func checkCaptured(t *testing.T, frames []audio.Frame) {
	t.Helper()
	first := frames[0]
	for i, f := range frames {
		if f.Captured.IsZero() || f.Captured.After(time.Now()) {
			t.Fatalf("frame %d (%s) captured at %v", i, f.Summary(), f.Captured)
		}
		want := first.Captured.Add(audio.SamplesToDuration(f.Start-first.Start, audio.PipelineRate))
		if d := f.Captured.Sub(want); d < -60*time.Millisecond || d > 60*time.Millisecond {
			t.Fatalf("frame %d (%s) captured %v off the stream's clock", i, f.Summary(), d)
		}
	}
}

// TestCapturesPlayback plays a speech recording into a null sink whose monitor is the
// microphone, and finds the recording in the captured audio.
func TestCapturesPlayback(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sinkRate   int
		channels   int
		micRate    int
		micChannel int
	}{
		{name: "48k stereo sink, native capture", sinkRate: 48000, channels: 2},
		{name: "44.1k sink, stereo capture at 22050", sinkRate: 44100, channels: 2, micRate: 22050, micChannel: 2},
		{name: "16k mono sink", sinkRate: 16000, channels: 1, micRate: 16000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			speech := testenv.SharedFile(t, "audio/goforward.wav")
			want, err := audio.DecodeWAVFile(speech)
			if err != nil {
				t.Fatal(err)
			}
			want, err = audio.ToPipeline(want)
			if err != nil {
				t.Fatal(err)
			}
			srv := pulsetest.New(t)
			ctx := context.Background()
			sink := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: tc.sinkRate, Channels: tc.channels})
			if err := srv.SetDefaultSource(ctx, sink.Monitor); err != nil {
				t.Fatal(err)
			}
			l := startMic(t, mic.Config{Device: "pulse", Rate: tc.micRate, Channels: tc.micChannel, Latency: 40 * time.Millisecond})
			frames := []audio.Frame{l.next(t, 10*time.Second)} // capturing
			if err := srv.Play(ctx, sink.Name, speech); err != nil {
				t.Fatal(err)
			}
			// Collect until half a second after the playback ended.
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
			for f := range l.frames { // what was captured before the stop
				frames = append(frames, f)
			}
			got := checkFrames(t, frames, l.mic.Dropped() > 0)
			checkCaptured(t, frames)
			if l.mic.Dropped() > 0 {
				t.Logf("%d capture frames were dropped (a busy machine)", l.mic.Dropped())
			}
			off, corr := pulsetest.Find(got, want.Samples)
			t.Logf("recording found %v into the capture, correlation %.3f", audio.SamplesToDuration(int64(off), 16000), corr)
			if corr < 0.9 {
				dump := filepath.Join(os.TempDir(), "parley-mic-capture.wav")
				audio.WriteWAVFile(dump, audio.Frame{Rate: 16000, Channels: 1, Samples: got}, 16)
				t.Fatalf("the captured audio does not contain the recording: best correlation %.3f (capture of %d frames, %v, written to %s)",
					corr, len(frames), audio.SamplesToDuration(int64(len(got)), 16000), dump)
			}
		})
	}
}

// TestDeviceLost kills the sound server during capture: the network stops with an error
// that says so, without a panic, after the frames captured so far were delivered.
func TestDeviceLost(t *testing.T) {
	srv := pulsetest.New(t)
	sink := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 48000, Channels: 1})
	if err := srv.SetDefaultSource(context.Background(), sink.Monitor); err != nil {
		t.Fatal(err)
	}
	l := startMic(t, mic.Config{Device: "pulse", Latency: 20 * time.Millisecond})
	var frames []audio.Frame
	for len(frames) < 10 {
		frames = append(frames, l.next(t, 10*time.Second))
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	err := l.wait(t, 10*time.Second)
	if !errors.Is(err, portaudio.ErrStreamFailed) {
		t.Fatalf("network error %v, want one wrapping portaudio.ErrStreamFailed", err)
	}
	var me *iu.ModuleError
	if !errors.As(err, &me) || me.Module != "mic" {
		t.Fatalf("error %v does not name the mic module", err)
	}
	for f := range l.frames {
		frames = append(frames, f)
	}
	checkFrames(t, frames, l.mic.Dropped() > 0)
	t.Logf("%v (after %d frames)", err, len(frames))
}

// TestFrozenServerIsLost stops the sound server (SIGSTOP) under a capture that delivers:
// the stream neither delivers nor ends, as when libpulse deadlocks on a dying server.
// The microphone must take the device for lost instead of waiting for good, and, when it
// carries on, fill the whole time without audio with silence.
func TestFrozenServerIsLost(t *testing.T) {
	for _, carryOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "stop", true: "carry_on"}[carryOn], func(t *testing.T) {
			srv := pulsetest.New(t)
			sink := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 48000, Channels: 1})
			if err := srv.SetDefaultSource(context.Background(), sink.Monitor); err != nil {
				t.Fatal(err)
			}
			l := startMic(t, mic.Config{Device: "pulse", Latency: 20 * time.Millisecond, ContinueOnDeviceLoss: carryOn})
			frames := []audio.Frame{l.next(t, 10*time.Second)}
			firstAt := time.Now()
			for len(frames) < 10 {
				frames = append(frames, l.next(t, 10*time.Second))
			}
			if err := syscall.Kill(srv.Pid(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			thaw := func() { _ = syscall.Kill(srv.Pid(), syscall.SIGCONT) }
			// Cleanups run last first: the server thaws before the others stop it, so
			// that the ends left behind finish.
			t.Cleanup(thaw)
			frozen := time.Now()
			if !carryOn {
				err := l.wait(t, 30*time.Second)
				if !errors.Is(err, portaudio.ErrStreamFailed) || !strings.Contains(err.Error(), "no audio") {
					t.Fatalf("network error %v, want one wrapping portaudio.ErrStreamFailed that says no audio came", err)
				}
				t.Logf("%v after %v", err, time.Since(frozen).Round(time.Millisecond))
				for f := range l.frames {
					frames = append(frames, f)
				}
				checkFrames(t, frames, l.mic.Dropped() > 0)
				return
			}
			// The silence comes once the loss is noticed, and then covers the stall. The
			// server thaws then, so that reopening (which waits for a frozen server) can.
			frozenFrom := len(frames)
			frames = append(frames, l.next(t, 30*time.Second))
			noticed := time.Since(frozen)
			thaw()
			const frame = 20 * time.Millisecond // mic.Config.FrameDuration's default
			for len(frames)-frozenFrom < int(noticed/frame) {
				frames = append(frames, l.next(t, 5*time.Second))
			}
			coveredBy := time.Since(frozen)
			t.Logf("the silence began %v after the server froze and covered that time by %v", noticed.Round(time.Millisecond), coveredBy.Round(time.Millisecond))
			if coveredBy-noticed > noticed/2 {
				t.Errorf("the silence covered the %v without audio only by %v: it did not start where the audio stopped", noticed.Round(time.Millisecond), coveredBy.Round(time.Millisecond))
			}
			checkFrames(t, frames, true)
			// The stream keeps the clock's time: no stretch left out, none emitted twice.
			streamed := audio.SamplesToDuration(frames[len(frames)-1].End()-frames[0].Start, audio.PipelineRate)
			if wall := time.Since(firstAt); streamed < wall-300*time.Millisecond || streamed > wall+300*time.Millisecond {
				t.Errorf("%v of audio in %v since the first frame", streamed.Round(time.Millisecond), wall.Round(time.Millisecond))
			}
		})
	}
}

// TestContinueOnDeviceLoss kills the sound server under a microphone that must carry on:
// it emits silence on the same timeline, and picks the device up again when a new
// server appears.
func TestContinueOnDeviceLoss(t *testing.T) {
	srv := pulsetest.New(t)
	ctx := context.Background()
	sink := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 48000, Channels: 1})
	if err := srv.SetDefaultSource(ctx, sink.Monitor); err != nil {
		t.Fatal(err)
	}
	l := startMic(t, mic.Config{Device: "pulse", Latency: 20 * time.Millisecond, ContinueOnDeviceLoss: true, ReopenInterval: 200 * time.Millisecond})
	var frames []audio.Frame
	for len(frames) < 5 {
		frames = append(frames, l.next(t, 10*time.Second))
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// Silence keeps coming while the device is gone, from where the audio stopped: at
	// once when the stream reports its end, after the mic's stall limit and a close
	// left behind when libpulse deadlocks instead (see engines/portaudio's TestServerDeath).
	lostFrom := len(frames)
	began := time.Now()
	for {
		elapsed, n := time.Since(began), len(frames)-lostFrom
		if elapsed >= time.Second && n >= int(elapsed/(40*time.Millisecond)) {
			break // at least half of the frames due
		}
		if elapsed > 20*time.Second {
			t.Fatalf("only %d frames in the %v after the device was lost", n, elapsed.Round(time.Millisecond))
		}
		frames = append(frames, l.next(t, 15*time.Second))
	}
	// A new server in the same place: the microphone finds the device again.
	srv2, err := pulseserver.Start(ctx, srv.Dir(), pulseserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	sink2, err := srv2.LoadNullSink(ctx, "room", pulsetest.SinkOptions{Rate: 48000, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv2.SetDefaultSource(ctx, sink2.Monitor); err != nil {
		t.Fatal(err)
	}
	tone := audio.Frame{Rate: 16000, Channels: 1, Samples: make([]float32, 16000)}
	for i := range tone.Samples {
		tone.Samples[i] = 0.5
		if i/8%2 == 0 {
			tone.Samples[i] = -0.5
		}
	}
	tonePath := filepath.Join(t.TempDir(), "tone.wav")
	if err := audio.WriteWAVFile(tonePath, tone, 16); err != nil {
		t.Fatal(err)
	}
	// Play until the tone shows up in the capture (the reopen takes up to 200 ms).
	heard := false
	for try := 0; try < 10 && !heard; try++ {
		if err := srv2.Play(ctx, sink2.Name, tonePath); err != nil {
			t.Fatal(err)
		}
		drain := time.After(100 * time.Millisecond)
	loop:
		for {
			select {
			case f := <-l.frames:
				frames = append(frames, f)
				heard = heard || audio.Peak(f.Samples) > 0.3
			case <-drain:
				break loop
			}
		}
	}
	if !heard {
		t.Fatal("the microphone did not pick the device up again")
	}
	l.cancel()
	if err := l.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for f := range l.frames {
		frames = append(frames, f)
	}
	checkFrames(t, frames, true)
}

func TestNeedsRealClock(t *testing.T) {
	m, err := mic.New("mic", mic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	v := clock.NewVirtual(time.Unix(0, 0))
	defer v.Close()
	net := iu.NewNetwork(iu.WithClock(v))
	if err := net.Add(m); err != nil {
		t.Fatal(err)
	}
	if err := net.Run(context.Background()); err == nil {
		t.Fatal("the microphone ran on a virtual clock")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []mic.Config{
		{FrameDuration: time.Microsecond},
		{FrameDuration: 2 * time.Second},
		{Rate: -1},
		{Queue: -time.Second},
	} {
		if _, err := mic.New("mic", cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
}
