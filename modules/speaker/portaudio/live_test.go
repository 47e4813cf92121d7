package portaudio_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	pa "github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/mic"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/speaker/portaudio"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// chunk is agent audio, as the TTS module makes it.
type chunk struct {
	f    audio.Frame
	turn int
	name string
}

func (c chunk) Kind() string     { return "speech" }
func (c chunk) Summary() string  { return c.name }
func (c chunk) PCM() audio.Frame { return c.f }
func (c chunk) AgentTurn() int   { return c.turn }

// room is a private sound server with one null sink that is both the default output and,
// through its monitor, the default input: what the speaker plays, "pulse" captures.
func room(t testing.TB) (*pulsetest.Server, pulsetest.Sink) {
	t.Helper()
	srv := pulsetest.New(t)
	ctx := context.Background()
	sink := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 48000, Channels: 1})
	if err := srv.SetDefaultSink(ctx, sink.Name); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSource(ctx, sink.Monitor); err != nil {
		t.Fatal(err)
	}
	return srv, sink
}

// script sends IUs at times after the network starts (or, when opened is not nil,
// after it is closed: a loaded machine may take most of a second to open the speaker's
// stream, and a step timed against the stream must not pass before it), then ends its
// output.
type scriptStep struct {
	at  time.Duration
	pay iu.Payload
}

func script(steps []scriptStep, end time.Duration, opened <-chan struct{}) iu.Module {
	return iu.ModuleFunc{ModuleName: "tts", Fn: func(ctx context.Context, p *iu.Ports) error {
		if opened != nil {
			select {
			case <-opened:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		start := p.Now()
		wait := func(at time.Duration) error {
			for p.Now().Before(start.Add(at)) {
				if _, err := p.Next(ctx, start.Add(at)); err != nil {
					return err
				}
			}
			return nil
		}
		for _, s := range steps {
			if err := wait(s.at); err != nil {
				return err
			}
			u := p.NewIU(s.pay)
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		return wait(end)
	}}
}

// reports collects progress IUs.
type reports struct {
	mu  sync.Mutex
	got []iu.IU
}

func (r *reports) Observe(_ time.Time, m iu.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, up := range m.Updates {
		if _, ok := up.IU.Payload.(speaker.Progress); ok && up.Type == iu.Add {
			r.got = append(r.got, up.IU)
		}
	}
}

func (r *reports) all() []iu.IU {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]iu.IU(nil), r.got...)
}

func runNet(t testing.TB, rep *reports, prod iu.Module, sp iu.Module) error {
	t.Helper()
	opts := []iu.Option{iu.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))}
	if rep != nil {
		opts = append(opts, iu.WithObserver(rep))
	}
	net := iu.NewNetwork(opts...)
	if err := net.Add(prod, sp); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(prod, sp); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return net.Run(ctx)
}

// chunks cuts a frame into 40 ms chunks of one turn, like the TTS module's.
func chunks(f audio.Frame, turn int) []scriptStep {
	n := f.Rate * 40 / 1000
	var steps []scriptStep
	for i := 0; i < f.Len(); i += n {
		part := audio.Frame{Rate: f.Rate, Channels: 1, Start: int64(i), Samples: f.Samples[i:min(i+n, f.Len())]}
		steps = append(steps, scriptStep{pay: chunk{f: part, turn: turn, name: fmt.Sprintf("chunk %d", i/n)}})
	}
	return steps
}

// TestDeviceSpeakerPlaysIntoSink plays a speech recording, cut into TTS-sized chunks,
// into a null sink and finds it in a recording of the sink's monitor.
func TestDeviceSpeakerPlaysIntoSink(t *testing.T) {
	srv, sink := room(t)
	speech, err := audio.DecodeWAVFile(testenv.SharedFile(t, "audio/goforward.wav"))
	if err != nil {
		t.Fatal(err)
	}
	speech = audio.Downmix(speech)
	recPath := filepath.Join(t.TempDir(), "monitor.wav")
	rec, err := srv.Record(context.Background(), sink.Monitor, recPath, pulsetest.RecordOptions{Rate: speech.Rate})
	if err != nil {
		t.Fatal(err)
	}
	steps := chunks(speech, 1)
	for i := range steps {
		steps[i].at = 200 * time.Millisecond
	}
	// Generous buffers: this test is about the signal arriving intact, and a busy
	// machine must not cut gaps into it (the timing tests below use tight ones).
	sp, err := portaudio.New("speaker", portaudio.Config{Device: "pulse", Latency: 150 * time.Millisecond,
		Options: speaker.Options{Lead: 400 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	rep := &reports{}
	if err := runNet(t, rep, script(steps, 0, nil), sp); err != nil {
		t.Fatal(err)
	}
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	got, err := audio.DecodeWAVFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	off, corr := pulsetest.Find(got.Samples, speech.Samples)
	t.Logf("speech found %v into the monitor recording, correlation %.3f", audio.SamplesToDuration(int64(off), got.Rate), corr)
	if corr < 0.9 {
		t.Fatalf("the monitor recording does not contain the speech (best correlation %.3f)", corr)
	}
	all := rep.all()
	last := all[len(all)-1].Payload.(speaker.Progress)
	if last.State != speaker.Idle || !last.Finished() || last.Item.(chunk).name != steps[len(steps)-1].pay.(chunk).name {
		t.Fatalf("last report %s, want the last chunk heard to its end", last.Summary())
	}
}

// capture records the default input (the sink's monitor) through PortAudio and keeps,
// for every callback, when its first sample was captured on this process's monotonic
// clock: the common time base with the speaker's progress reports (see TestProgressMatchesRecording).
type capture struct {
	rate      int
	base      time.Time
	samples   []float32
	n         atomic.Int64 // samples written; the callback owns samples[n:]
	overflows atomic.Int64
	mu        sync.Mutex
	blocks    []captureBlock // appended by the callback under mu (test code: fine)
	stream    *pa.Stream
}

type captureBlock struct {
	pos int64
	at  time.Duration // since base, when sample pos reached the monitor
}

func startCapture(t *testing.T, h *pa.Host, seconds int) *capture {
	t.Helper()
	dev, err := h.Find("pulse", pa.Input)
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{rate: 48000, base: time.Now()}
	c.samples = make([]float32, seconds*c.rate)
	s, err := h.OpenInput(pa.StreamConfig{Device: dev, Channels: 1, SampleRate: float64(c.rate), Latency: 20 * time.Millisecond},
		func(in []float32, frames int, ti pa.Timing, fl pa.Flags) {
			if fl&pa.InputOverflow != 0 {
				c.overflows.Add(1) // samples were lost: the stream positions no longer hold
			}
			// The buffer's first sample reached the monitor (Current - InputADC) before
			// this callback; both are PortAudio stream times, only their difference is used.
			at := time.Since(c.base) - (ti.Current - ti.InputADC)
			pos := c.n.Load()
			n := min(int64(frames), int64(len(c.samples))-pos)
			copy(c.samples[pos:], in[:n])
			c.mu.Lock()
			c.blocks = append(c.blocks, captureBlock{pos: pos, at: at})
			c.mu.Unlock()
			c.n.Store(pos + n)
		})
	if err != nil {
		t.Fatal(err)
	}
	c.stream = s
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// timeOf returns when captured sample i reached the monitor.
//
// The monitor produces samples at exactly its rate on the system clock, so sample i
// reaches it at t0 + i/rate for one t0. Each callback gives an estimate of t0 (when its
// first sample was captured, minus that sample's place in the stream); a callback that
// ran late, or whose latency estimate is off for a moment, gives a bad one. The median
// over all callbacks is immune to those.
func (c *capture) timeOf(i int64) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t0s := make([]time.Duration, len(c.blocks))
	for k, b := range c.blocks {
		t0s[k] = b.at - audio.SamplesToDuration(b.pos, c.rate)
	}
	sort.Slice(t0s, func(a, b int) bool { return t0s[a] < t0s[b] })
	return c.base.Add(t0s[len(t0s)/2] + audio.SamplesToDuration(i, c.rate))
}

func (c *capture) stop(t *testing.T) []float32 {
	if err := c.stream.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.overflows.Load(); n > 0 {
		t.Fatalf("the test's capture overflowed %d times: its timeline is broken (machine too busy)", n)
	}
	return c.samples[:c.n.Load()]
}

func burst(rate int, tone, total time.Duration, amp float64) audio.Frame {
	f := audio.Frame{Rate: rate, Channels: 1, Samples: make([]float32, audio.DurationToSamples(total, rate))}
	for i := range audio.DurationToSamples(tone, rate) {
		f.Samples[i] = float32(amp * math.Sin(2*math.Pi*1000*float64(i)/float64(rate)))
	}
	return f
}

// TestProgressMatchesRecording checks that the speaker's progress reports say when the
// listener hears each sample, to within 30 ms of what a recording of the null sink's
// monitor shows.
//
// Time base: both sides are converted, inside their PortAudio callbacks, to this
// process's monotonic clock. The speaker's callback takes time.Now() and adds the delay
// PortAudio reports until its buffer's first frame reaches the listener (OutputDAC -
// Current); a steady progress report created at C saying Offset samples of an item were
// heard puts the item's first sample at C - Offset/rate. The test's own capture stream on
// the monitor takes time.Now() in its callback and subtracts the delay since its buffer's
// first frame left the sink (Current - InputADC); since the monitor produces samples at
// a fixed rate, the median over all callbacks gives every captured sample's time (see
// capture.timeOf). The null sink "plays" a sample when it renders it into its monitor, so
// both name the same instant; the capture path's latency estimate is the independent
// reference.
func TestProgressMatchesRecording(t *testing.T) {
	room(t)
	h, err := pa.Open(pa.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cap := startCapture(t, h, 10)
	const bursts = 8
	var steps []scriptStep
	for k := range bursts {
		steps = append(steps, scriptStep{at: 300 * time.Millisecond, pay: chunk{f: burst(16000, 40*time.Millisecond, 300*time.Millisecond, 0.5), turn: 1, name: fmt.Sprint("burst ", k)}})
	}
	sp, err := portaudio.New("speaker", portaudio.Config{Device: "pulse", Latency: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rep := &reports{}
	if err := runNet(t, rep, script(steps, 0, nil), sp); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the capture see the end
	rec := cap.stop(t)

	// When the progress reports say each burst began to be heard.
	reported := map[string]time.Time{}
	for _, u := range rep.all() {
		p := u.Payload.(speaker.Progress)
		if p.State != speaker.Playing || p.Heard == "" || p.Offset == 0 || p.Offset > 16000*40/1000 {
			continue // only reports while the burst itself sounds
		}
		name := p.Item.(chunk).name
		if _, seen := reported[name]; !seen {
			reported[name] = u.Created.Add(-audio.SamplesToDuration(int64(p.Offset), 16000))
		}
	}
	onsets := pulsetest.Onsets(rec, 0.1, cap.rate/10)
	if len(onsets) != bursts {
		t.Fatalf("found %d bursts in the recording, want %d", len(onsets), bursts)
	}
	var worst time.Duration
	for k, i := range onsets {
		name := fmt.Sprint("burst ", k)
		want, ok := reported[name]
		if !ok {
			t.Errorf("no progress report while %s sounded", name)
			continue
		}
		diff := cap.timeOf(int64(i)).Sub(want)
		t.Logf("%s: recorded %+.1f ms from the reported onset", name, float64(diff)/1e6)
		if diff.Abs() > worst {
			worst = diff.Abs()
		}
	}
	if worst > 30*time.Millisecond {
		t.Fatalf("progress and recording disagree by up to %v", worst)
	}
}

// TestDeviceSpeakerInterrupt interrupts a long utterance and checks the Stopped report
// against the recording: the audio ends where and when the report says.
func TestDeviceSpeakerInterrupt(t *testing.T) {
	room(t)
	h, err := pa.Open(pa.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cap := startCapture(t, h, 10)
	tone := burst(16000, 2*time.Second, 2*time.Second, 0.5)
	steps := chunks(tone, 1)
	for i := range steps {
		steps[i].at = 200 * time.Millisecond
	}
	steps = append(steps,
		scriptStep{at: 900 * time.Millisecond, pay: control.Command{Action: control.Interrupt, TurnID: 1}},
		scriptStep{at: 1000 * time.Millisecond, pay: chunk{f: burst(16000, 40*time.Millisecond, 40*time.Millisecond, 0.5), turn: 1, name: "late"}})
	opened := make(chan struct{})
	sp, err := portaudio.New("speaker", portaudio.Config{Device: "pulse", Latency: 40 * time.Millisecond,
		OnOpen: func(portaudio.Opened) { close(opened) }})
	if err != nil {
		t.Fatal(err)
	}
	rep := &reports{}
	if err := runNet(t, rep, script(steps, 1500*time.Millisecond, opened), sp); err != nil {
		t.Fatal(err)
	}
	rec := cap.stop(t)
	var stop *speaker.Progress
	var stopIU iu.IU
	for _, u := range rep.all() {
		p := u.Payload.(speaker.Progress)
		if p.State == speaker.Stopped && !p.Tail && stop == nil {
			stop, stopIU = &p, u
		}
	}
	if stop == nil {
		t.Fatal("no final Stopped report")
	}
	// How much of the tone the recording holds (counted in 1 ms windows, so that a gap
	// where the busy machine let the sink run dry does not count), and where it ends.
	win := cap.rate / 1000
	var toneWindows, end int
	for i := 0; i+win <= len(rec); i += win {
		if audio.RMS(rec[i:i+win]) > 0.2 {
			toneWindows++
			end = i + win
		}
	}
	heard := audio.SamplesToDuration(int64(stop.Item.(chunk).f.Start)+int64(stop.Offset), 16000)
	onsets := pulsetest.Onsets(rec, 0.1, cap.rate/10)
	if len(onsets) != 1 {
		t.Fatalf("%d onsets in the recording of %v, want 1 (the late chunk must not play); stopped report: %s, %v of the tone heard",
			len(onsets), audio.SamplesToDuration(int64(len(rec)), cap.rate), stop.Summary(), heard)
	}
	recorded := cap.timeOf(int64(end))
	playedRec := time.Duration(toneWindows) * time.Millisecond
	t.Logf("stopped report: %s; heard %v of the tone; the recording holds %v of it", stop.Summary(), heard, playedRec)
	if d := (heard - playedRec).Abs(); d > 30*time.Millisecond {
		t.Fatalf("the report says %v of the tone was heard, the recording %v", heard, playedRec)
	}
	// The report's Pos says when the tail ended (relative to the speaker's start);
	// the report was made no earlier than that.
	if stopIU.Created.Before(recorded.Add(-30 * time.Millisecond)) {
		t.Fatalf("final Stopped report at %v, but audio was still recorded until %v", stopIU.Created, recorded)
	}
}

// TestDeviceSpeakerLost kills the sound server under a playing speaker: the network
// stops with an error that wraps pa.ErrStreamFailed, after a last Stopped report.
func TestDeviceSpeakerLost(t *testing.T) {
	srv, _ := room(t)
	steps := chunks(burst(16000, 3*time.Second, 3*time.Second, 0.3), 1)
	sp, err := portaudio.New("speaker", portaudio.Config{Device: "pulse"})
	if err != nil {
		t.Fatal(err)
	}
	rep := &reports{}
	go func() {
		time.Sleep(700 * time.Millisecond)
		srv.Kill()
	}()
	err = runNet(t, rep, script(steps, 5*time.Second, nil), sp)
	if !errors.Is(err, pa.ErrStreamFailed) {
		t.Fatalf("network error %v, want pa.ErrStreamFailed", err)
	}
	all := rep.all()
	if len(all) == 0 {
		t.Fatal("no progress at all")
	}
	last := all[len(all)-1].Payload.(speaker.Progress)
	if last.State != speaker.Stopped || last.Reason != "output failed" {
		t.Fatalf("last report %s, want stopped (output failed)", last.Summary())
	}
	t.Logf("%v; last report %s", err, last.Summary())
}

// relayAudio makes microphone audio playable.
type relayAudio struct{ audio.Frame }

func (r relayAudio) PCM() audio.Frame { return r.Frame }

// relay forwards the microphone's frames to the speaker at gain g, and every frame to
// frames for the benchmark to watch.
func relay(g float32, frames chan<- audio.Frame) iu.Module {
	return iu.ModuleFunc{ModuleName: "relay", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind == iu.EventInputDone {
				return nil
			}
			for _, up := range ev.Message.Updates {
				f, ok := up.IU.Payload.(audio.Frame)
				if !ok || up.Type != iu.Add {
					continue
				}
				select {
				case frames <- f:
				default:
				}
				out := audio.Frame{Rate: f.Rate, Channels: f.Channels, Start: f.Start, Samples: make([]float32, len(f.Samples))}
				for i, v := range f.Samples {
					out.Samples[i] = v * g
				}
				u := p.NewIU(relayAudio{out}, up.IU.ID)
				if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
					return err
				}
			}
		}
	}}
}

// BenchmarkLoopThroughLatency measures the acoustic loop-through latency of the live
// path: microphone → modules → speaker, over real PortAudio streams through a real
// PulseAudio server.
//
// One null sink stands for the room: the speaker plays into it and the microphone
// captures its monitor. Each iteration plays a 10 ms tone burst into the sink with paplay;
// the microphone hears it, a relay module passes the microphone's frames to the speaker
// at gain 0.4, and the speaker plays them back into the same sink, where the microphone
// hears the echo. The latency is the distance between the burst and its echo in the
// microphone's own stream positions (sample counts at 16 kHz), so both ends are measured
// on one clock, the audio's, by the same capture path; no wall-clock timestamps are
// involved. It covers the capture buffer, the resampling to 16 kHz and back, the network
// hops, the speaker's ring and the playback buffer, and PulseAudio's own buffering on both
// sides. The echo of the echo (gain 0.16) stays below the detection threshold.
//
// ms/op is the mean latency; min-ms and max-ms the extremes. On a live loop the
// speaker has no slack: audio arrives exactly as fast as it is played, so a gap the
// output has to insert (a late callback, a stalled module) delays everything after it
// for the rest of the run, and max-ms shows that growth on a busy machine. The time per
// op (ns/op) is dominated by paplay's start-up and the pause between bursts, and means
// nothing.
//
//	scripts/env go test -run '^$' -bench LoopThroughLatency -benchtime 20x ./modules/speaker/portaudio/
func BenchmarkLoopThroughLatency(b *testing.B) {
	srv, sink := room(b)
	const (
		micLatency = 20 * time.Millisecond
		spkLatency = 20 * time.Millisecond
		threshold  = 0.15
	)
	impulse := burst(16000, 10*time.Millisecond, 10*time.Millisecond, 0.8)
	path := filepath.Join(b.TempDir(), "impulse.wav")
	if err := audio.WriteWAVFile(path, impulse, 16); err != nil {
		b.Fatal(err)
	}
	m, err := mic.New("mic", mic.Config{Device: "pulse", Latency: micLatency})
	if err != nil {
		b.Fatal(err)
	}
	sp, err := portaudio.New("speaker", portaudio.Config{Device: "pulse", Latency: spkLatency, Options: speaker.Options{Lead: 40 * time.Millisecond}})
	if err != nil {
		b.Fatal(err)
	}
	frames := make(chan audio.Frame, 4096)
	rl := relay(0.4, frames)
	net := iu.NewNetwork(iu.WithLogger(zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel))))
	if err := net.Add(m, rl, sp); err != nil {
		b.Fatal(err)
	}
	if err := net.Connect(m, rl); err != nil {
		b.Fatal(err)
	}
	if err := net.Connect(rl, sp); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- net.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()

	// watch returns the stream positions of the next burst and its echo.
	watch := func(timeout time.Duration) (int64, int64, error) {
		var first int64 = -1
		var quietSince int64 = -1
		deadline := time.After(timeout)
		for {
			select {
			case f := <-frames:
				for i, v := range f.Samples {
					pos := f.Start + int64(i)
					if v > threshold || v < -threshold {
						if first < 0 {
							first = pos
						} else if quietSince >= 0 && pos-quietSince > 160 {
							return first, pos, nil
						}
						quietSince = -1
					} else if first >= 0 && quietSince < 0 {
						quietSince = pos
					}
				}
			case <-deadline:
				return 0, 0, fmt.Errorf("no burst and echo within %v (burst at %d)", timeout, first)
			}
		}
	}
	// Wait until the microphone runs.
	select {
	case <-frames:
	case <-time.After(10 * time.Second):
		b.Fatal("the microphone delivers nothing")
	}
	var sum, lo, hi time.Duration
	lo = time.Hour
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := srv.StartPlay(ctx, sink.Name, path)
		if err != nil {
			b.Fatal(err)
		}
		in, out, err := watch(5 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
		lat := audio.SamplesToDuration(out-in, audio.PipelineRate)
		sum += lat
		lo, hi = min(lo, lat), max(hi, lat)
		// Let the echoes die away before the next burst.
		quiet := time.After(300 * time.Millisecond)
	drain:
		for {
			select {
			case <-frames:
			case <-quiet:
				break drain
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(sum)/float64(b.N)/1e6, "ms/op")
	b.ReportMetric(float64(lo)/1e6, "min-ms")
	b.ReportMetric(float64(hi)/1e6, "max-ms")
	if d := m.Dropped(); d > 0 {
		b.Logf("the microphone dropped %d frames", d)
	}
}
