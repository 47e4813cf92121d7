package livetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/console"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// userTrack renders recordings placed at times (seconds) into one 16 kHz WAV, the way a
// scenario would sound in the room.
func userTrack(t *testing.T, length time.Duration, recs ...any) string {
	t.Helper()
	out := make([]float32, audio.DurationToSamples(length, audio.PipelineRate))
	for i := 0; i < len(recs); i += 2 {
		f, err := audio.DecodeWAVFile(recs[i].(string))
		if err != nil {
			t.Fatal(err)
		}
		if f, err = audio.ToPipeline(f); err != nil {
			t.Fatal(err)
		}
		at := int(audio.DurationToSamples(time.Duration(recs[i+1].(float64)*float64(time.Second)), audio.PipelineRate))
		audio.Mix(out, f.Samples, at, 1)
	}
	path := filepath.Join(t.TempDir(), "room.wav")
	if err := audio.WriteWAVFile(path, audio.Frame{Samples: out, Rate: audio.PipelineRate, Channels: 1}, 16); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLiveBargeInThroughPulseAudio runs the live agent (PortAudio microphone and
// speaker) against a real PulseAudio server: the user's recordings are played into a
// null sink whose monitor is the microphone, and the agent speaks into another null
// sink. The user barges in while the agent speaks; the stored agent turn must be exactly
// what the speaker reports the listener heard.
func TestLiveBargeInThroughPulseAudio(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	cfg.LLM.MaxTokens = 48 // a reply long enough to be interrupted in real time
	cfg.Dialogue.MinWordFraction = 1
	cfg.Audio.Input, cfg.Audio.Output = "pulse", "pulse"
	cfg.Audio.EchoCancel = "off"
	shared := testenv.SharedDir(t)
	srv := pulsetest.New(t)
	ctx := context.Background()
	room := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 16000, Channels: 1})
	out := srv.NullSink(t, "agent_out", pulsetest.SinkOptions{Rate: 48000, Channels: 2})
	if err := srv.SetDefaultSource(ctx, room.Monitor); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSink(ctx, out.Name); err != nil {
		t.Fatal(err)
	}
	question := userTrack(t, 3*time.Second, filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5)
	bargeIn := userTrack(t, 3*time.Second, filepath.Join(shared, "audio", "goforward.wav"), 0.0)
	eng, err := pipeline.LoadEngines(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	runCtx, stop := context.WithTimeout(ctx, 40*time.Second)
	defer stop()
	rec := pipetest.NewRecord()
	heard := &firstHeard{playing: make(chan struct{})}
	var transcript strings.Builder
	// The user asks once the agent listens, and barges in once its answer is heard (a
	// fixed time would miss a short answer on a slow machine).
	go func() {
		defer stop()
		time.Sleep(time.Second)
		if !playInto(runCtx, t, srv, room.Name, question) {
			return
		}
		select {
		case <-heard.playing:
		case <-runCtx.Done():
			t.Errorf("the agent never answered")
			return
		}
		time.Sleep(300 * time.Millisecond)
		if !playInto(runCtx, t, srv, room.Name, bargeIn) {
			return
		}
		// Give the agent time to answer the barge-in, then end the session.
		time.Sleep(8 * time.Second)
	}()
	timelinePath := filepath.Join(t.TempDir(), "timeline.jsonl")
	timeline, err := os.Create(timelinePath)
	if err != nil {
		t.Fatal(err)
	}
	defer timeline.Close()
	res, err := pipeline.Live(runCtx, cfg, eng, pipeline.LiveOptions{Console: console.NewTerminal(&transcript, nil, false), SessionDir: filepath.Join(t.TempDir(), "session"), Observers: []iu.Observer{rec, heard}, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), Timeline: timeline})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conversation:\n%s", transcript.String())
	agents := pipetest.AgentUtterances(res.History)
	if len(agents) == 0 || !agents[0].Interrupted {
		t.Logf("how the sounds over the agent were handled:\n%s", pipetest.SoundTimeline(timelinePath, 0, time.Minute))
		t.Fatalf("history %+v: want the first agent turn interrupted by the barge-in", res.History.Utterances())
	}
	cut := agents[0]
	pipetest.CheckConsoleShowsHistory(t, transcript.String(), res.History)
	if want := pipetest.HeardText(t, rec, cut.TurnID); cut.Text != want {
		t.Errorf("stored agent turn %q, but the speaker reports the listener heard %q (generated %q)", cut.Text, want, cut.FullText)
	}
	for _, m := range res.Metrics {
		t.Logf("latencies: %s", m)
	}
}

// playInto plays a track into the sink and waits for it to end; false (and the test
// failed) when it could not.
func playInto(ctx context.Context, t *testing.T, srv *pulsetest.Server, sink, track string) bool {
	play, err := srv.StartPlay(ctx, sink, track)
	if err != nil {
		t.Errorf("playing %s: %v", track, err)
		return false
	}
	_ = play.Wait()
	return true
}

// firstHeard closes playing when the speaker first reports the agent audible.
type firstHeard struct {
	once    sync.Once
	playing chan struct{}
}

func (f *firstHeard) Observe(_ time.Time, m iu.Message) {
	for _, up := range m.Updates {
		if p, ok := up.IU.Payload.(speaker.Progress); ok && up.Type == iu.Add && p.State == speaker.Playing {
			f.once.Do(func() { close(f.playing) })
		}
	}
}
