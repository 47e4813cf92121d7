package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/iu/plot"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/console"
	"github.com/parley-voice/parley/modules/recorder"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"go.uber.org/zap"
)

// ReplayOptions are the settings of one replay.
type ReplayOptions struct {
	// Input is a scenario (YAML) or a WAV file.
	Input string
	// OutDir receives the replay's files (and the session).
	OutDir string
	// RealClock runs in real time (real latencies); otherwise on a virtual clock, as fast
	// as possible and deterministic.
	RealClock bool
	// Console, when set, receives the conversation as it happens.
	Console io.Writer
	// Record writes heard.wav, agent.wav, user.wav, transcript.txt, timeline.jsonl,
	// timeline.svg and metrics.json, and for a scenario recordings.json (bench runs skip
	// them).
	Record bool
	Logger *zap.Logger
	// Observers see every update (tests).
	Observers []iu.Observer
	// Echo, when set, simulates a laptop with this echo path in place of the
	// scenario's echo block (tests run every scenario on a laptop this way).
	Echo *room.Config
	// MeasureCPU counts the CPU time of the process and of each module (ReplayResult.CPU).
	MeasureCPU bool
	// Voice, when set, wraps the speech engine. espeak-ng carries state from one
	// synthesis to the next, so the same text sounds a little different after other
	// speech; tests that compare replays give it a memo that repeats each text's first
	// audio.
	Voice func(tts.Engine) tts.Engine
	// Recogniser, when set, wraps the recogniser the config names (agent bench
	// --realistic --asr whisper: bench.Transcript around a model of whisper's shape).
	Recogniser RecogniserWrapper
}

// Outcome is what a session left: its latencies, the history (the conversation as said
// and heard: Transcript), and where the session was saved.
type Outcome struct {
	Metrics []metrics.Turn
	// Speculation counts the replies prepared while the user might still be speaking.
	Speculation metrics.Speculation
	History     *dialogue.History
	// Origin is the clock time the session's timeline starts at: an utterance's Start
	// and End less Origin are where it lies on it (SessionTime).
	Origin     time.Time
	SessionDir string
	// SpeakerUnderruns counts the times the output ran dry while the agent's audio
	// was waiting to be played (the speaker module was late).
	SpeakerUnderruns int64
	// VADMaxLag is how far the VAD fell behind the microphone (or the recording) at
	// worst (vad.Module.MaxLag).
	VADMaxLag time.Duration
}

// Transcript returns the conversation as the history keeps it, each utterance with when
// it was said and heard (nil without a history).
func (o Outcome) Transcript() []dialogue.Utterance {
	if o.History == nil {
		return nil
	}
	return o.History.Utterances()
}

// SessionTime returns clock time t on the session's timeline (0 for a zero t: an agent
// turn nobody heard has no times).
func (o Outcome) SessionTime(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(o.Origin)
}

// outcome reads what agent left after its Run returned.
func (a *Agent) outcome(ctx context.Context) (Outcome, error) {
	h, err := a.Store.Snapshot(ctx)
	o := Outcome{Metrics: a.Latencies.Turns(), Speculation: a.Latencies.Speculation(),
		History: h, Origin: a.Origin, SessionDir: a.SessionDir}
	if s, ok := a.speaker.(interface{ Underruns() int64 }); ok {
		o.SpeakerUnderruns = s.Underruns()
	}
	if a.vad != nil {
		o.VADMaxLag = a.vad.MaxLag()
	}
	return o, err
}

// ReplayResult is what a replay produced.
type ReplayResult struct {
	Outcome
	OutDir string
	Wall   time.Duration
	// EchoCancel says whether the replay cancelled echo, and why (audio.echo_cancel).
	EchoCancel aec.Decision
	// AECCost is what echo cancellation cost (zero when it was off).
	AECCost aec.Cost
	// CPU is what the replay cost in CPU time (ReplayOptions.MeasureCPU).
	CPU metrics.CPU
}

// Replay runs the agent on a recording or scenario.
func Replay(ctx context.Context, cfg Config, eng *Engines, opts ReplayOptions) (*ReplayResult, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	if opts.Record {
		if err := CheckReplayOutputs(opts.OutDir); err != nil {
			return nil, err
		}
	}
	var clk clock.Clock = clock.Real{}
	if !opts.RealClock {
		v := clock.NewVirtual(time.Now())
		defer v.Close()
		clk = v
	}
	input, echo, scenario, err := openReplayInput(ctx, opts, source.Config{FrameDuration: cfg.Audio.Frame}, log)
	if err != nil {
		return nil, err
	}
	if opts.Echo != nil {
		echo = opts.Echo
	}
	// audio.echo_cancel in a replay: auto cancels when the replay simulates a laptop.
	cancel := aec.DecideReplay(cfg.Audio.EchoCancelMode(), echo != nil)
	log.Named(NameAEC).Info("echo cancellation", zap.Bool("on", cancel.On), zap.String("why", cancel.Reason), zap.Bool("simulated_laptop", echo != nil))
	agentWAV := filepath.Join(opts.OutDir, "agent.wav")
	userWAV := filepath.Join(opts.OutDir, "user.wav")
	spkCfg := speaker.FileConfig{OutputLatency: cfg.Audio.OutputLatency}
	spkCfg.Played = cancel.On || echo != nil
	if opts.Record {
		spkCfg.Path = agentWAV
	}
	spk, err := speaker.NewFile(NameSpeaker, spkCfg)
	if err != nil {
		return nil, err
	}
	aio := IO{Input: input, Speaker: spk, Clock: clk, Logger: log, SessionDir: filepath.Join(opts.OutDir, "session"), Observers: opts.Observers,
		Echo: echo, EchoCancel: cancel.On, MeasureCPU: opts.MeasureCPU, Voice: opts.Voice, Recogniser: opts.Recogniser}
	if echo != nil {
		// The simulated laptop's whole delay lies beyond the speaker's and the input's
		// timing, as a real device's buffers would not: tell the canceller.
		aio.EchoDelay = echo.Delay
	}
	if opts.Console != nil {
		aio.Console = console.New(NameConsole, console.NewTerminal(opts.Console, nil, false))
	}
	var timelineFile *os.File
	if opts.Record {
		if timelineFile, err = regularfile.Create(filepath.Join(opts.OutDir, "timeline.jsonl"), 0o644); err != nil {
			return nil, err
		}
		defer timelineFile.Close()
		aio.Timeline = timelineFile
	}
	agent, err := Build(ctx, cfg, eng, aio)
	if err != nil {
		return nil, err
	}
	defer agent.Close()
	if scenario != nil && scenario.HasAgentCues() {
		// Recordings placed after the agent's speech follow what the speaker plays.
		if err := agent.Network.ConnectNames(NameSpeaker, NameInput); err != nil {
			return nil, err
		}
	}
	if opts.Record {
		// user.wav is the recording as it was; mic.wav what the simulated laptop's
		// microphone picked up, aec.wav what the canceller left of it (what the VAD
		// heard), aec-linear.wav its linear output (what the recogniser and the overlap
		// module decoded; AEC3 only).
		type recording struct {
			rec  *recorder.Module
			from string
		}
		recs := []recording{{recorder.New(nameUserAudio, userWAV, 16), NameInput}}
		if echo != nil {
			recs = append(recs, recording{recorder.New(nameMicAudio, filepath.Join(opts.OutDir, "mic.wav"), 16), NameEcho})
		}
		if cancel.On {
			recs = append(recs, recording{recorder.New(nameAECAudio, filepath.Join(opts.OutDir, "aec.wav"), 16), NameAEC},
				recording{recorder.NewLinear(nameAECLinearAudio, filepath.Join(opts.OutDir, "aec-linear.wav"), 16), NameAEC})
		}
		for _, r := range recs {
			if err := agent.Network.Add(r.rec); err != nil {
				return nil, err
			}
			if err := agent.Network.ConnectNames(r.from, r.rec.Name()); err != nil {
				return nil, err
			}
		}
	}
	began, cpuBefore := time.Now(), metrics.ProcessCPU()
	if err := agent.Run(ctx); err != nil {
		return nil, err
	}
	res := &ReplayResult{OutDir: opts.OutDir, Wall: time.Since(began), EchoCancel: cancel}
	if opts.MeasureCPU {
		res.CPU = metrics.CPU{Wall: res.Wall, Process: metrics.ProcessCPU() - cpuBefore, Modules: agent.Network.CPU()}
	}
	if agent.AEC != nil {
		res.AECCost = agent.AEC.Cost()
	}
	if res.Outcome, err = agent.outcome(ctx); err != nil {
		return nil, err
	}
	if !opts.Record {
		return res, nil
	}
	if err := timelineFile.Close(); err != nil {
		return nil, err
	}
	if err := writeReplayFiles(res, userWAV, agentWAV); err != nil {
		return nil, err
	}
	if scenario != nil {
		if err := writeRecordings(filepath.Join(opts.OutDir, RecordingsFile), scenario, input.Placements()); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// openReplayInput opens the replay's recording or scenario (.yaml, .yml), and returns
// the scenario's echo path when it simulates a laptop. A scenario's absent recordings
// are spoken into OutDir/said (SpeakAbsent), and the console says so.
func openReplayInput(ctx context.Context, opts ReplayOptions, cfg source.Config, log *zap.Logger) (*source.Source, *room.Config, *source.Scenario, error) {
	path := opts.Input
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		sc, err := source.LoadScenario(path)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := MakeRecordings(ctx, sc); err != nil {
			return nil, nil, nil, err
		}
		said := filepath.Join(opts.OutDir, "said")
		spoken, err := SpeakAbsent(ctx, sc, said)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(spoken) > 0 {
			log.Info("spoke the scenario's absent recordings", zap.Strings("recordings", spoken), zap.String("voice", SaidVoice), zap.String("into", said))
			if opts.Console != nil {
				fmt.Fprintf(opts.Console, "%d of the scenario's recordings are not here (%s): their words are spoken by %s (%s)\n",
					len(spoken), strings.Join(spoken, ", "), SaidVoice, said)
			}
		}
		src, err := source.NewScenario(NameInput, sc, cfg)
		return src, sc.Echo, sc, err
	}
	src, err := source.NewFile(NameInput, path, cfg)
	return src, nil, nil, err
}

// writeReplayFiles writes the listener's mix, the transcript, the metrics and the plot.
func writeReplayFiles(res *ReplayResult, userWAV, agentWAV string) error {
	dir := res.OutDir
	// Mixed from the files, block by block: a long session's audio never sits in memory.
	if err := audio.MixWAVFiles(filepath.Join(dir, "heard.wav"), 16, 0.99, userWAV, agentWAV); err != nil {
		return fmt.Errorf("heard audio: %w", err)
	}

	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	for _, e := range res.Transcript() {
		who := "user"
		if e.Speaker == dialogue.Agent {
			who = "agent"
		}
		fmt.Fprintf(tw, "%6.2f–%6.2f\t%s\t%d\t%s", res.SessionTime(e.Start).Seconds(), res.SessionTime(e.End).Seconds(), who, e.TurnID, e.Text)
		if e.Backchannel {
			fmt.Fprint(tw, "\t(backchannel)")
		}
		if e.Interrupted {
			fmt.Fprintf(tw, "\t(interrupted; generated: %q)", e.FullText)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if err := regularfile.WriteFile(filepath.Join(dir, "transcript.txt"), []byte(tb.String()), 0o644); err != nil {
		return err
	}

	data, err := json.MarshalIndent(struct {
		Turns       []metrics.Turn           `json:"turns"`
		Summary     map[string]metrics.Stats `json:"summary"`
		Speculation *metrics.Speculation     `json:"speculation,omitempty"`
	}{res.Metrics, metrics.Summarize(res.Metrics), speculationOf(res.Speculation)}, "", "  ")
	if err != nil {
		return err
	}
	if err := regularfile.WriteFile(filepath.Join(dir, "metrics.json"), data, 0o644); err != nil {
		return err
	}

	tf, err := os.Open(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		return err
	}
	defer tf.Close()
	// Drawn as the timeline is read, in memory first: a plot that fails leaves no empty
	// file.
	var svg bytes.Buffer
	if _, err := plot.SVGFrom(&svg, tf, plot.Options{}); err != nil {
		return fmt.Errorf("timeline plot: %w", err)
	}
	return regularfile.WriteFile(filepath.Join(dir, "timeline.svg"), svg.Bytes(), 0o644)
}

// replayOutputs are the files a recorded replay writes into its folder.
var replayOutputs = []string{"agent.wav", "user.wav", "mic.wav", "aec.wav", "aec-linear.wav", "heard.wav",
	"timeline.jsonl", "transcript.txt", "metrics.json", "timeline.svg"}

// CheckReplayOutputs refuses a folder where one of the files a recorded replay writes is
// a device, a FIFO or a symbolic link (they are written only as regular files). Replay
// calls it before it runs; commands call it before they load the engines.
func CheckReplayOutputs(dir string) error {
	for _, name := range replayOutputs {
		if err := regularfile.CheckOutput(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// speculationOf leaves the counts out of reports of pipelines that prepare nothing.
func speculationOf(s metrics.Speculation) *metrics.Speculation {
	if s == (metrics.Speculation{}) {
		return nil
	}
	return &s
}
