package bench

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/pulseserver"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/userdirs"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// TestLiveBenchScenario runs the bench scenario once through a private PulseAudio
// server with the demo's real engines: the agent answers with its voice-to-voice
// latency measured, the barge-in over the first answer stops it, and the device
// latencies that explain live against replay come out.
func TestLiveBenchScenario(t *testing.T) {
	shared := testenv.SharedDir(t)
	t.Setenv("PARLEY_SHARED", shared)
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix) // stands for the en-us model
	root := testenv.ModuleRoot(t)
	cfg, err := pipeline.Load(filepath.Join(root, "configs", "demo.yaml"), pipeline.Default(userdirs.Paths{Models: t.TempDir(), Sessions: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pipeline.LoadEngines(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bench, err := StartLive(ctx, t.TempDir(), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if errors.Is(err, pulseserver.ErrNotInstalled) {
		testenv.Missing(t, "pulseaudio", testenv.EnvFix)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := bench.Close(); err != nil {
			t.Error(err)
		}
	}()
	cfg = pipeline.WithPipeline(cfg, pipeline.Incremental)
	// The demo's first answer ends before the scenario's barge-in at 7 s (in a replay
	// too); spoken slower, it lasts past it.
	cfg.TTS.Rate = 100
	run, err := bench.Run(ctx, cfg, eng, filepath.Join(root, "configs", "scenarios", "bench.yaml"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := run.Result
	for _, e := range res.Transcript() {
		t.Logf("%6.2f–%6.2f speaker %v turn %d: %q interrupted=%v", res.SessionTime(e.Start).Seconds(), res.SessionTime(e.End).Seconds(), e.Speaker, e.TurnID, e.Text, e.Interrupted)
	}
	for _, m := range res.Metrics {
		t.Logf("latencies: %s", m)
	}
	d := run.Devices
	t.Logf("listening after %v; track %v; mic dropped %d frames; echo cancellation %v", run.Listening, run.Length, res.MicDropped, res.Echo.Decision.On)
	t.Logf("requested in/out %v/%v; PortAudio in/out %v/%v; capture delay p50 %v p90 %v; output tail %+v; timeline skew %v",
		d.RequestedInput, d.RequestedOutput, d.PortAudioInput, d.PortAudioOutput, d.CaptureDelay.P50, d.CaptureDelay.P90, d.OutputTail, d.TimelineSkew)
	t.Logf("PulseAudio (%d samples): microphone %+v; speaker %+v; user %+v", d.Pulse.Samples, d.Pulse.Microphone, d.Pulse.Speaker, d.Pulse.User)
	for _, c := range d.Costs() {
		t.Logf("adds %8v to %v: %s", c.Adds.Round(100*time.Microsecond), c.Latencies, c.Cause)
	}

	if run.Length < 38*time.Second || run.Listening <= 0 {
		t.Errorf("track %v long, agent listening after %v: want the bench scenario's 38 s and more after the devices opened", run.Length, run.Listening)
	}
	stats := metrics.Summarize(res.Metrics)
	if s := stats[metrics.VoiceToVoice]; s.N < 2 {
		t.Errorf("voice-to-voice measured %d times, want the answers to at least two of the three questions; metrics %v", s.N, res.Metrics)
	}
	interrupted := false
	for _, m := range res.Metrics {
		if _, ok := m.Latencies()[metrics.BargeIn]; ok && m.Interrupted {
			interrupted = true
		}
	}
	if !interrupted {
		t.Errorf("no barge-in stopped the agent: metrics %v", res.Metrics)
	}
	if d.CaptureDelay.N == 0 || d.PortAudioInput <= 0 || d.PortAudioOutput <= 0 {
		t.Errorf("device latencies missing: %+v", d)
	}
	if d.Pulse.Samples == 0 || d.Pulse.Microphone.Application == "" || d.Pulse.Speaker.Application == "" || d.Pulse.User.Application == "" {
		t.Errorf("the sound server's streams were not all seen: %+v", d.Pulse)
	}
}
