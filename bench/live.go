// Package bench holds what 'agent bench' runs beside pipeline's replays: Live plays a
// scenario into the live agent through a private PulseAudio server and measures what
// the device path adds to the latencies.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulseserver"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/mic"
	"github.com/parley-voice/parley/modules/recorder"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/speaker/portaudio"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

// Live plays scenarios into the live agent through a private PulseAudio server: the
// scenario's recordings play into a null sink (the room) whose monitor is the default
// source, which the agent's microphone records through PortAudio, and the agent speaks
// into another null sink, the default sink. Nothing reaches the user's own sound server.
//
// It points this process's PulseAudio clients at the private server (the environment is
// process-wide) until Close: only one Live may exist at a time, and nothing else in
// the process may use sound devices meanwhile.
type Live struct {
	srv      *pulseserver.Server
	room     pulseserver.Sink // the recordings play here; its monitor is the microphone
	speakers pulseserver.Sink // the agent plays here
	restore  func()           // restores the process's PulseAudio environment
	tmpDir   string           // a short directory made for the server's socket ("" when dir was used)
	agentLog *zap.Logger      // the live agent's logger, as given
	log      *zap.Logger      // the bench's own lines
}

// Live's sinks. The room runs at the pipeline's rate, mono, so that the recordings
// reach the microphone without a resampler of the server's in the way; the speakers
// run at a laptop's usual 48 kHz stereo.
const (
	liveRoomSink    = "bench_room"
	liveSpeakerSink = "bench_speakers"
)

// StartLive starts a private PulseAudio server whose files live in dir (or, when
// dir is too long for a socket path, in a temporary directory removed by Close).
func StartLive(ctx context.Context, dir string, log *zap.Logger) (*Live, error) {
	if log == nil {
		log = zap.NewNop()
	}
	b := &Live{agentLog: log, log: log.Named("bench")}
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
	if b.srv, err = pulseserver.Start(ctx, abs); err != nil {
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

func (b *Live) setUp(ctx context.Context) error {
	var err error
	if b.room, err = b.srv.LoadNullSink(ctx, liveRoomSink, pulseserver.SinkOptions{Rate: audio.PipelineRate, Channels: 1, Description: "the bench's room (the user)"}); err != nil {
		return fmt.Errorf("live bench: %w", err)
	}
	if b.speakers, err = b.srv.LoadNullSink(ctx, liveSpeakerSink, pulseserver.SinkOptions{Rate: 48000, Channels: 2, Description: "the bench's speakers"}); err != nil {
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
func (b *Live) Close() error {
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

func (b *Live) removeTmp() {
	if b.tmpDir != "" {
		os.RemoveAll(b.tmpDir)
		b.tmpDir = ""
	}
}

// LiveRun is what one live run of a scenario measured.
type LiveRun struct {
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
	Devices LiveDevices
}

// LiveDevices is what is known of the devices' latencies in one live run: what was asked,
// what PortAudio and PulseAudio reported, and what the IUs show.
type LiveDevices struct {
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
	Pulse ServerLatencies
}

// ServerLatencies is the private server's account of the run's streams.
type ServerLatencies struct {
	// Microphone is the agent's recording stream (from the room's monitor), Speaker its
	// playback stream, User the stream that plays the scenario into the room (which
	// delays the scenario, not the latencies measured from the captured audio).
	Microphone, Speaker, User pulseserver.StreamLatency
	// Samples is how many times the server was asked.
	Samples int
}

// LiveCost is one cause of the difference between a live latency and its replay.
type LiveCost struct {
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
func (d LiveDevices) Costs() []LiveCost {
	var out []LiveCost
	if d.CaptureDelay.N > 0 {
		out = append(out, LiveCost{Cause: "microphone buffering (PortAudio and PulseAudio capture; median over frames)", Adds: d.CaptureDelay.P50,
			Latencies: []string{metrics.VoiceToVoice, metrics.BargeIn}})
	}
	if d.PortAudioOutput > 0 {
		out = append(out, LiveCost{Cause: fmt.Sprintf("speaker latency: PortAudio's %v over the %v a replay simulates", d.PortAudioOutput.Round(100*time.Microsecond), d.ReplayOutput),
			Adds: d.PortAudioOutput - d.ReplayOutput, Latencies: []string{metrics.VoiceToVoice}})
	}
	if d.OutputTail.N > 0 {
		out = append(out, LiveCost{Cause: fmt.Sprintf("speaker tail after a pause or stop: the device's %v (median) over the %v a replay plays", d.OutputTail.P50.Round(100*time.Microsecond), d.ReplayOutput),
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
func (b *Live) Run(ctx context.Context, cfg pipeline.Config, eng *pipeline.Engines, scenario, outDir string) (*LiveRun, error) {
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
	run := &LiveRun{Track: filepath.Join(outDir, "user.wav")}
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
		SessionDir: filepath.Join(outDir, "session"), Logger: b.agentLog, Observers: []iu.Observer{probe},
	})
	stop()
	pb := <-played
	run.Result = res
	if !pb.listening.IsZero() {
		run.Listening = pb.listening.Sub(began)
	}
	if res != nil {
		run.Devices.PortAudioInput, run.Devices.PortAudioOutput = res.Microphone.Latency, res.Speakers.Latency
	}
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
	server    ServerLatencies
	err       error
}

// maxFinish bounds how long a run waits after the scenario for the agent to finish its
// last turn.
const maxFinish = 30 * time.Second

// play waits for the agent to listen, plays track into the room, samples the server's
// latencies meanwhile, and ends the run (stop) once the track has played and the agent
// has finished the turn it was on (quiet), as a replay runs until the agent is done.
func (b *Live) play(ctx context.Context, listening <-chan time.Time, track string, quiet func() <-chan struct{}, stop func()) playback {
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
func (b *Live) sampleServer(ctx context.Context, into *ServerLatencies) {
	l, err := b.srv.Latencies(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Debug("reading the sound server's latencies", zap.Error(err))
		}
		return
	}
	into.Samples++
	for _, s := range l.Streams {
		var slot *pulseserver.StreamLatency
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
