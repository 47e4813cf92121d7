package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/mic"
	"github.com/parley-voice/parley/modules/recorder"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/speaker/portaudio"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// liveBench plays scenarios into the live agent through a private PulseAudio server: the
// scenario's recordings play into a null sink (the room) whose monitor is the default
// source, which the agent's microphone records through PortAudio, and the agent speaks
// into another null sink, the default sink. Nothing reaches the user's own sound server.
//
// It points this process's PulseAudio clients at the private server (the environment is
// process-wide) until Close: only one liveBench may exist at a time, and nothing else in
// the process may use sound devices meanwhile.
type liveBench struct {
	srv      *pulsetest.Server
	room     pulsetest.Sink // the recordings play here; its monitor is the microphone
	speakers pulsetest.Sink // the agent plays here
	restore  func()         // restores the process's PulseAudio environment
	tmpDir   string         // a short directory made for the server's socket ("" when dir was used)
	agentLog *zap.Logger    // the live agent's logger, as given
	log      *zap.Logger    // the bench's own lines
}

// liveBench's sinks. The room runs at the pipeline's rate, mono, so that the recordings
// reach the microphone without a resampler of the server's in the way; the speakers
// run at a laptop's usual 48 kHz stereo.
const (
	liveRoomSink    = "bench_room"
	liveSpeakerSink = "bench_speakers"
)

// startLiveBench starts a private PulseAudio server whose files live in dir (or, when
// dir is too long for a socket path, in a temporary directory removed by Close).
func startLiveBench(ctx context.Context, dir string, log *zap.Logger) (*liveBench, error) {
	if log == nil {
		log = zap.NewNop()
	}
	b := &liveBench{agentLog: log, log: log.Named("bench")}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("live bench: %w", err)
	}
	if len(abs) > 80 { // the socket path must fit sockaddr_un
		if abs, err = os.MkdirTemp("", "parley-pulse-"); err != nil {
			return nil, fmt.Errorf("live bench: %w", err)
		}
		b.tmpDir = abs
	}
	if b.srv, err = pulsetest.Start(ctx, abs); err != nil {
		b.removeTmp()
		return nil, fmt.Errorf("live bench: %w", err)
	}
	if err := b.setUp(ctx); err != nil {
		b.Close()
		return nil, err
	}
	b.restore = b.srv.ApplyEnv()
	b.log.Info("private PulseAudio server for the live bench", zap.String("dir", b.srv.Dir()), zap.Int("pid", b.srv.Pid()))
	return b, nil
}

func (b *liveBench) setUp(ctx context.Context) error {
	var err error
	if b.room, err = b.srv.LoadNullSink(ctx, liveRoomSink, pulsetest.SinkOptions{Rate: audio.PipelineRate, Channels: 1, Description: "the bench's room (the user)"}); err != nil {
		return fmt.Errorf("live bench: %w", err)
	}
	if b.speakers, err = b.srv.LoadNullSink(ctx, liveSpeakerSink, pulsetest.SinkOptions{Rate: 48000, Channels: 2, Description: "the bench's speakers"}); err != nil {
		return fmt.Errorf("live bench: %w", err)
	}
	if err := b.srv.SetDefaultSource(ctx, b.room.Monitor); err != nil {
		return fmt.Errorf("live bench: %w", err)
	}
	if err := b.srv.SetDefaultSink(ctx, b.speakers.Name); err != nil {
		return fmt.Errorf("live bench: %w", err)
	}
	return nil
}

// Close stops the server and restores the process's PulseAudio environment.
func (b *liveBench) Close() error {
	if b.restore != nil {
		b.restore()
		b.restore = nil
	}
	var err error
	if b.srv != nil {
		err = b.srv.Close()
		if err != nil {
			err = fmt.Errorf("live bench: %w; log:\n%s", err, b.srv.LogTail(20))
		}
		b.srv = nil
	}
	b.removeTmp()
	return err
}

func (b *liveBench) removeTmp() {
	if b.tmpDir != "" {
		os.RemoveAll(b.tmpDir)
		b.tmpDir = ""
	}
}

// liveRun is what one live run of a scenario measured.
type liveRun struct {
	// Result is the live session's outcome: metrics, history, echo cancellation, drops.
	Result *pipeline.LiveResult
	// Track is the scenario rendered as the user's side of the room (16 kHz WAV): what
	// was played into the room from the moment the agent listened.
	Track string
	// Length is the track's length (the scenario with its tail).
	Length time.Duration
	// Listening is how long the devices took to open: from the start of the run to the
	// moment the agent listened, where the scenario's time 0 was played.
	Listening time.Duration
	// Devices is what the device path adds, and how it was measured.
	Devices liveDevices
}

// liveDevices is what is known of the devices' latencies in one live run: what was asked,
// what PortAudio and PulseAudio reported, and what the IUs show.
type liveDevices struct {
	// RequestedInput and RequestedOutput are the device latencies PortAudio was asked
	// for (audio.input_latency and audio.output_latency, or the microphone's 20 ms and
	// the speaker's 50 ms defaults when they are 0).
	RequestedInput, RequestedOutput time.Duration
	// ReplayOutput is the output latency a replay's file speaker simulates
	// (audio.output_latency): only the device's excess over it is a difference.
	ReplayOutput time.Duration
	// PortAudioInput and PortAudioOutput are the stream latencies PortAudio reported when
	// the devices opened (zero when unknown). The speaker takes the listener's time from
	// the output's (its DAC time, with this as the fallback).
	PortAudioInput, PortAudioOutput time.Duration
	// CaptureDelay is, over the microphone's frames, how long after its last sample was
	// captured each frame reached the pipeline: the input path's buffering, which a
	// replay does not have (its frames arrive at their stream time). Everything the
	// pipeline decides from the user's audio (end of turn, barge-in onset) comes this
	// much later.
	CaptureDelay metrics.Stats
	// OutputTail is, over the speaker's pauses and stops, how long the device went on
	// playing what it held (the replay's file speaker plays ReplayOutput of tail).
	OutputTail metrics.Stats
	// TimelineSkew is how much later the microphone's stream began than the speaker's
	// output timeline. The latency observer counts the user's stream times from the
	// microphone's first captured sample (its frames' capture times), so this is no
	// longer in the latencies; it is kept to show how long the device took to open.
	// Zero when either was not seen.
	TimelineSkew time.Duration
	// Pulse is the sound server's buffering, sampled while the scenario played (the
	// largest total seen per stream).
	Pulse liveServerLatencies
}

// liveServerLatencies is the private server's account of the run's streams.
type liveServerLatencies struct {
	// Microphone is the agent's recording stream (from the room's monitor), Speaker its
	// playback stream, User the stream that plays the scenario into the room (which
	// delays the scenario, not the latencies measured from the captured audio).
	Microphone, Speaker, User pulsetest.StreamLatency
	// Samples is how many times the server was asked.
	Samples int
}

// liveCost is one cause of the difference between a live latency and its replay.
type liveCost struct {
	// Cause says what the device path does, Adds how much it adds (it may be negative),
	// and Latencies which latencies (metrics names) it adds to.
	Cause     string
	Adds      time.Duration
	Latencies []string
}

// Costs lists what the device path adds to the latencies over a replay, by cause, from
// the medians. What a live latency's difference from the replay's holds beyond their
// sum is the machine: scheduling and the CPU that PortAudio, the sound server and the
// device callbacks take.
func (d liveDevices) Costs() []liveCost {
	var out []liveCost
	if d.CaptureDelay.N > 0 {
		out = append(out, liveCost{Cause: "microphone buffering (PortAudio and PulseAudio capture; median over frames)", Adds: d.CaptureDelay.P50,
			Latencies: []string{metrics.VoiceToVoice, metrics.BargeIn}})
	}
	if d.PortAudioOutput > 0 {
		out = append(out, liveCost{Cause: fmt.Sprintf("speaker latency: PortAudio's %v over the %v a replay simulates", d.PortAudioOutput.Round(100*time.Microsecond), d.ReplayOutput),
			Adds: d.PortAudioOutput - d.ReplayOutput, Latencies: []string{metrics.VoiceToVoice}})
	}
	if d.OutputTail.N > 0 {
		out = append(out, liveCost{Cause: fmt.Sprintf("speaker tail after a pause or stop: the device's %v (median) over the %v a replay plays", d.OutputTail.P50.Round(100*time.Microsecond), d.ReplayOutput),
			Adds: d.OutputTail.P50 - d.ReplayOutput, Latencies: []string{metrics.BargeIn}})
	}
	return out
}

// Run plays the scenario into the room and runs the live agent (pipeline.Live with cfg,
// its devices set to the private server's) until the scenario's tail has passed and the
// agent has finished the turn it was on (as a replay runs until its agent is done). The
// scenario's time 0 is when the agent starts listening: the scenario, rendered to one
// track by the replay's own source (outDir/user.wav), starts playing then, so its
// recordings reach the microphone at their times, as in a replay, plus the room's
// playback latency. The session is saved in outDir/session.
//
// The live run has no echo path (the speakers' sink is not heard by the microphone), so
// echo cancellation follows the replay's rule for a scenario without a simulated laptop
// (off unless audio.echo_cancel is on); the scenario's echo block, if any, is not
// simulated.
func (b *liveBench) Run(ctx context.Context, cfg pipeline.Config, eng *pipeline.Engines, scenario, outDir string) (*liveRun, error) {
	if b.srv == nil {
		return nil, errors.New("live bench: closed")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("live bench: %w", err)
	}
	sc, err := source.LoadScenario(scenario)
	if err != nil {
		return nil, err
	}
	if _, err := pipeline.SpeakAbsent(ctx, sc, filepath.Join(outDir, "said")); err != nil {
		return nil, err
	}
	if sc.Echo != nil {
		b.log.Warn("the scenario simulates a laptop's echo; the live bench plays it without", zap.String("scenario", scenario))
	}
	run := &liveRun{Track: filepath.Join(outDir, "user.wav")}
	if run.Length, err = renderScenario(ctx, sc, cfg.Audio.Frame, run.Track); err != nil {
		return nil, err
	}

	cfg.Audio.Input, cfg.Audio.Output = "pulse", "pulse" // ALSA's pulse device: the server's defaults
	if !aec.DecideReplay(cfg.Audio.EchoCancelMode(), false).On {
		cfg.Audio.EchoCancel = string(aec.Off)
	}
	d := &run.Devices
	d.RequestedInput, d.RequestedOutput, d.ReplayOutput = cfg.Audio.InputLatency, cfg.Audio.OutputLatency, cfg.Audio.OutputLatency
	if d.RequestedInput == 0 {
		d.RequestedInput = mic.DefaultLatency
	}
	if d.RequestedOutput == 0 {
		d.RequestedOutput = portaudio.DefaultLatency
	}
	opened := &openedStreams{}
	log := b.agentLog.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, opened) }))
	probe := &deviceProbe{}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	listening := make(chan time.Time, 1)
	played := make(chan playback, 1)
	began := time.Now()
	go func() { played <- b.play(runCtx, listening, run.Track, probe.quiet, stop) }()
	res, liveErr := pipeline.Live(runCtx, cfg, eng, pipeline.LiveOptions{
		OnListening: func() {
			select {
			case listening <- time.Now():
			default:
			}
		},
		SessionDir: filepath.Join(outDir, "session"), Logger: log, Observers: []iu.Observer{probe},
	})
	stop()
	pb := <-played
	run.Result = res
	if !pb.listening.IsZero() {
		run.Listening = pb.listening.Sub(began)
	}
	run.Devices.PortAudioInput, run.Devices.PortAudioOutput = opened.latencies()
	probe.fill(&run.Devices)
	run.Devices.Pulse = pb.server
	switch {
	case liveErr != nil:
		return run, fmt.Errorf("live bench: %w", liveErr)
	case pb.err != nil:
		return run, fmt.Errorf("live bench: %w", pb.err)
	case ctx.Err() != nil:
		return run, ctx.Err()
	}
	b.log.Info("live bench run", zap.Int("exchanges", len(res.Metrics)), zap.Duration("listening_after", run.Listening),
		zap.Int64("mic_dropped", res.MicDropped), zap.Duration("timeline_skew", run.Devices.TimelineSkew))
	return run, nil
}

// playback is what playing the scenario into the room left.
type playback struct {
	listening time.Time // when the agent listened (zero: it never did)
	server    liveServerLatencies
	err       error
}

// maxFinish bounds how long a run waits after the scenario for the agent to finish its
// last turn.
const maxFinish = 30 * time.Second

// play waits for the agent to listen, plays track into the room, samples the server's
// latencies meanwhile, and ends the run (stop) once the track has played and the agent
// has finished the turn it was on (quiet), as a replay runs until the agent is done.
func (b *liveBench) play(ctx context.Context, listening <-chan time.Time, track string, quiet func() <-chan struct{}, stop func()) playback {
	defer stop()
	var pb playback
	select {
	case pb.listening = <-listening:
	case <-ctx.Done():
		return pb
	}
	p, err := b.srv.StartPlay(ctx, b.room.Name, track)
	if err != nil {
		pb.err = err
		return pb
	}
	// A few samples suffice (each runs pactl four times): the buffers settle within a
	// second and stay put.
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	first := time.After(time.Second)
	for {
		select {
		case <-p.Done():
			if err := p.Wait(); err != nil && ctx.Err() == nil {
				pb.err = err
				return pb
			}
			limit := time.NewTimer(maxFinish)
			defer limit.Stop()
			select {
			case <-quiet():
			case <-limit.C:
				b.log.Warn("the agent was still answering long after the scenario ended; stopping it", zap.Duration("waited", maxFinish))
			case <-ctx.Done():
			}
			return pb
		case <-ctx.Done():
			_ = p.Stop()
			return pb
		case <-first:
			b.sampleServer(ctx, &pb.server)
		case <-tick.C:
			b.sampleServer(ctx, &pb.server)
		}
	}
}

// sampleServer asks the server for its latencies and keeps, per stream of the run, the
// largest seen.
func (b *liveBench) sampleServer(ctx context.Context, into *liveServerLatencies) {
	l, err := b.srv.Latencies(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Debug("reading the sound server's latencies", zap.Error(err))
		}
		return
	}
	into.Samples++
	for _, s := range l.Streams {
		var slot *pulsetest.StreamLatency
		switch {
		case s.Playback && s.Device == b.room.Name:
			slot = &into.User
		case s.Playback && s.Device == b.speakers.Name:
			slot = &into.Speaker
		case !s.Playback && s.Device == b.room.Monitor:
			slot = &into.Microphone
		default:
			continue
		}
		if s.Total() >= slot.Total() {
			*slot = s
		}
	}
}

// renderScenario writes the scenario as one 16 kHz mono WAV, tail included, with the
// replay's own source module (so it sounds exactly as a replay hears it), and returns
// its length.
func renderScenario(ctx context.Context, sc *source.Scenario, frame time.Duration, path string) (time.Duration, error) {
	src, err := source.NewScenario(pipeline.NameInput, sc, source.Config{FrameDuration: frame, Pacing: source.PaceNone})
	if err != nil {
		return 0, err
	}
	rec := recorder.New("track", path, 16)
	var samples int64
	count := iu.ModuleFunc{ModuleName: "length", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == iu.EventInputDone {
				return err
			}
			if ev.Kind != iu.EventMessage {
				continue
			}
			for _, up := range ev.Message.Updates {
				if f, ok := up.IU.Payload.(audio.Frame); ok && up.Type == iu.Add {
					samples = max(samples, f.Start+int64(len(f.Samples)))
				}
			}
		}
	}}
	net := iu.NewNetwork()
	if err := net.Add(src, rec, count); err != nil {
		return 0, err
	}
	for _, to := range []iu.Module{rec, count} {
		if err := net.Connect(src, to); err != nil {
			return 0, err
		}
	}
	if err := net.Run(ctx); err != nil {
		return 0, fmt.Errorf("rendering scenario %s: %w", sc.Path, err)
	}
	return audio.SamplesToDuration(samples, audio.PipelineRate), nil
}

// openedStreams is a log core that keeps the stream latencies the microphone and the
// speaker log when their devices open ("microphone open", "speaker output open"). It
// reads only the entries' own fields, so a logger's With fields need no keeping.
type openedStreams struct {
	mu            sync.Mutex
	input, output time.Duration
}

func (o *openedStreams) Enabled(l zapcore.Level) bool      { return l >= zapcore.InfoLevel }
func (o *openedStreams) With([]zapcore.Field) zapcore.Core { return o }
func (o *openedStreams) Sync() error                       { return nil }

func (o *openedStreams) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == "microphone open" || e.Message == "speaker output open" {
		return ce.AddCore(e, o)
	}
	return ce
}

func (o *openedStreams) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if d, ok := enc.Fields["input_latency"].(time.Duration); ok && e.Message == "microphone open" {
		o.input = d
	}
	if d, ok := enc.Fields["output_latency"].(time.Duration); ok && e.Message == "speaker output open" {
		o.output = d
	}
	return nil
}

func (o *openedStreams) latencies() (in, out time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.input, o.output
}

// deviceProbe watches the live network's IUs for the device timing: when the
// microphone's frames were captured and when they arrived, where the speaker's output
// timeline began, and how long the speaker's tails lasted. Observe runs on every
// sending module's goroutine.
type deviceProbe struct {
	mu sync.Mutex
	// micEpoch is the earliest capture time of the microphone's stream position 0
	// (the mic's own capture clock, a sliding minimum, stamps the frames).
	micEpoch time.Time
	// outputStart is the earliest estimate of the speaker's output timeline start: a
	// Playing report's Pos is "now" on that timeline, sent at most a little later.
	outputStart  time.Time
	captureDelay []time.Duration
	// tails are the speaker's pause and stop reports with a tail: when they were sent
	// and when the tail ends on the output timeline.
	tails []tailReport
	// answering holds the agent turns under way (the manager's agent-turn IUs added
	// and not yet committed); quiet are closed when it empties.
	answering    map[int]struct{}
	quietWaiters []chan struct{}
}

// quiet returns a channel closed once no agent turn is under way.
func (d *deviceProbe) quiet() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{})
	if len(d.answering) == 0 {
		close(ch)
	} else {
		d.quietWaiters = append(d.quietWaiters, ch)
	}
	return ch
}

type tailReport struct {
	at  time.Time
	end time.Duration
}

// Observe implements iu.Observer.
func (d *deviceProbe) Observe(at time.Time, m iu.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, up := range m.Updates {
		if rec, ok := up.IU.Payload.(manager.AgentTurn); ok {
			// The manager's agent-turn IU: ADDed when it asks for a turn, COMMITted when
			// the turn is over.
			switch up.Type {
			case iu.Add:
				d.startTurn(rec.TurnID)
			case iu.Commit:
				d.endTurn(rec.TurnID)
			}
			continue
		}
		if up.Type != iu.Add {
			continue
		}
		switch pl := up.IU.Payload.(type) {
		case audio.Frame:
			// The microphone's own frames: what the echo canceller makes of them is
			// grounded in them.
			if len(up.IU.GroundedIn) > 0 || pl.Captured.IsZero() || pl.Rate <= 0 {
				continue
			}
			epoch := pl.Captured.Add(-audio.SamplesToDuration(pl.Start, pl.Rate))
			if d.micEpoch.IsZero() || epoch.Before(d.micEpoch) {
				d.micEpoch = epoch
			}
			d.captureDelay = append(d.captureDelay, at.Sub(pl.Captured.Add(pl.Duration())))
		case speaker.Progress:
			switch {
			case pl.State == speaker.Playing && !pl.Tail:
				if start := at.Add(-pl.Pos); d.outputStart.IsZero() || start.Before(d.outputStart) {
					d.outputStart = start
				}
			case (pl.State == speaker.Paused || pl.State == speaker.Stopped) && pl.Tail:
				d.tails = append(d.tails, tailReport{at: at, end: pl.Pos})
			}
		}
	}
}

func (d *deviceProbe) startTurn(id int) {
	if d.answering == nil {
		d.answering = map[int]struct{}{}
	}
	d.answering[id] = struct{}{}
}

// endTurn notes that agent turn id is over, and wakes those waiting for quiet when no
// turn is under way.
func (d *deviceProbe) endTurn(id int) {
	delete(d.answering, id)
	if len(d.answering) == 0 {
		for _, ch := range d.quietWaiters {
			close(ch)
		}
		d.quietWaiters = nil
	}
}

// fill writes what the probe saw into devices.
func (d *deviceProbe) fill(devices *liveDevices) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.captureDelay) > 0 {
		devices.CaptureDelay = metrics.Of(d.captureDelay)
	}
	if d.outputStart.IsZero() {
		return
	}
	if !d.micEpoch.IsZero() {
		devices.TimelineSkew = d.micEpoch.Sub(d.outputStart)
	}
	var tails []time.Duration
	for _, t := range d.tails {
		// The tail ends at end on the output timeline; the report was sent at at.
		if tail := d.outputStart.Add(t.end).Sub(t.at); tail >= 0 {
			tails = append(tails, tail)
		}
	}
	if len(tails) > 0 {
		devices.OutputTail = metrics.Of(tails)
	}
}
