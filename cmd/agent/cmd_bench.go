package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/bench"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/internal/shapemodels"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

func benchCommand() command {
	return command{
		Name:    "bench",
		Summary: "replay a scripted scenario N times in real time per pipeline (predictive, incremental, turn-based): latency percentiles and CPU per module; --realistic with real-size models",
		Run:     runBench,
	}
}

// realisticConfig is the configuration `agent bench --realistic` starts from; the bench
// points its llm.model at the shape-true model.
const realisticConfig = "configs/realistic.yaml"

// benchReport is what `agent bench` measured, as written to bench.json.
type benchReport struct {
	Scenario string    `json:"scenario"`
	Config   string    `json:"config"`
	Runs     int       `json:"runs"`
	Date     time.Time `json:"date"`
	// Realistic says the LLM was a shape-true model (Shape; random weights, real cost).
	Realistic bool   `json:"realistic"`
	Shape     string `json:"shape,omitempty"`
	// ASRShape is the recogniser's shape with --asr whisper (random weights, real cost;
	// the words from the scenario's transcript), "" when the recogniser heard the words.
	ASRShape string `json:"asr_shape,omitempty"`
	// Laptop says the replays simulated a laptop's echo path (room.Laptop) over the
	// scenario's own.
	Laptop bool `json:"laptop,omitempty"`
	// Machine is where it ran and how the engines shared it.
	Machine benchMachine `json:"machine"`
	// Models are the files and engines each role used.
	Models map[string]string `json:"models"`
	// Modes holds each pipeline's latency statistics, Turns the exchanges behind them.
	Modes map[string]map[string]metrics.Stats `json:"modes"`
	Turns map[string][]metrics.Turn           `json:"turns"`
	// CPU is each pipeline's CPU time per second of audio, in total and per module.
	CPU map[string]metrics.CPU `json:"cpu"`
	// Speculation counts the replies each pipeline prepared ahead (predictive only).
	Speculation map[string]metrics.Speculation `json:"speculation,omitempty"`
	// SpeakerUnderruns counts, per pipeline over its runs, the times the speaker ran
	// dry while the agent's audio was waiting (the audio path starved).
	SpeakerUnderruns map[string]int64 `json:"speaker_underruns"`
	// VADMaxLagMS is, per pipeline, the furthest the VAD fell behind its input in any
	// run (milliseconds; one Silero window is 32 ms).
	VADMaxLagMS map[string]float64 `json:"vad_max_lag_ms"`
	// EchoCancellation is the canceller's CPU time per second of audio, per pipeline
	// (only when the replays simulate a laptop: the scenario's echo block or --laptop).
	EchoCancellation map[string]float64 `json:"echo_cancellation_cpu_per_s,omitempty"`
	// Live holds, with --live, the same runs through a real PulseAudio server.
	Live *benchLive `json:"live,omitempty"`
}

// benchLive is what the live runs measured, per pipeline, beside the replays.
type benchLive struct {
	Modes map[string]map[string]metrics.Stats `json:"modes"`
	Turns map[string][]metrics.Turn           `json:"turns"`
	// MicDropped counts the microphone frames dropped because the pipeline fell behind,
	// SpeakerUnderruns the times the speaker ran dry while audio was waiting.
	MicDropped       map[string]int64   `json:"mic_dropped"`
	SpeakerUnderruns map[string]int64   `json:"speaker_underruns"`
	VADMaxLagMS      map[string]float64 `json:"vad_max_lag_ms"`
	// Devices is what each pipeline's last live run knew of the device path, and Costs
	// what that adds to the latencies over a replay.
	Devices map[string]bench.LiveDevices `json:"devices"`
	Costs   map[string][]bench.LiveCost  `json:"costs"`
}

// benchMachine describes the machine and the thread plan of a bench.
type benchMachine struct {
	Cores      int                 `json:"cores"`
	GoMaxProcs int                 `json:"gomaxprocs"`
	Threads    pipeline.ThreadPlan `json:"threads"`
}

func runBench(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "bench", "[SCENARIO.yaml]")
	cfgPath := configFlag(fs)
	runs := fs.Int("n", 3, "replays per pipeline")
	out := fs.String("o", "", "output directory for bench.json and the replays (default: bench-TIME in the logs directory)")
	maxTokens := fs.Int("max-tokens", 0, "reply length in tokens (default: the config's llm.max_tokens)")
	only := fs.String("pipeline", "all", "predictive, incremental, turn-based or all")
	realistic := fs.Bool("realistic", false, "use an LLM of a real default's shape with random weights (built into the cache by scripts/shape-models) and "+realisticConfig)
	live := fs.Bool("live", false, "run the scenario also live through a private PulseAudio server (a virtual microphone and speakers) and compare with the replays")
	laptop := fs.Bool("laptop", false, "replay on a simulated laptop whose speakers reach its microphone (30 ms, −6 dB, RT60 300 ms), the echo cancelled as audio.echo_cancel says (auto: on); the report gives the canceller's CPU time")
	asrName := fs.String("asr", "", "with --realistic, the recogniser in the loop: "+pipeline.EnginePocketsphinx+" (realistic.yaml's: the words it hears) or "+pipeline.EngineWhisper+
		" (a model of "+shapemodels.WhisperTinyEn+"'s shape with random weights, at its real cost, with the default configuration's whisper threads and hop; the words are the scenario's says: texts, placed by forced alignment)")
	shape := fs.String("shape", shapemodels.Qwen25_05B, "the shape --realistic uses ("+shapemodels.Qwen25_05B+", "+shapemodels.Qwen25_05BVocab32k+", "+shapemodels.TinyLlama11B+")")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	scenario := "configs/scenarios/bench.yaml"
	if len(rest) == 1 {
		scenario = rest[0]
	} else if len(rest) > 1 {
		return usageErrorf("bench takes at most one scenario")
	}
	if *runs < 1 {
		return usageErrorf("-n must be at least 1")
	}
	if *only != "all" && !slices.Contains(pipeline.Pipelines, *only) {
		return usageErrorf("--pipeline %q: want predictive, incremental, turn-based or all", *only)
	}
	if *laptop && *live {
		return usageErrorf("--laptop simulates the echo in the replays; the live runs have no echo path")
	}
	var echo *room.Config
	if *laptop {
		path := room.Laptop()
		echo = &path
	}
	if flagSet(fs, "shape") && !*realistic {
		return usageErrorf("--shape needs --realistic")
	}
	if flagSet(fs, "asr") && !*realistic {
		return usageErrorf("--asr needs --realistic (a configuration names the recogniser otherwise: asr.engine)")
	}
	if *asrName == pipeline.EngineWhisper && *live {
		return usageErrorf("--asr whisper answers with the scenario's words where a replay's stream has them; a live run's microphone places them elsewhere: leave out --live")
	}
	if *asrName != "" && *asrName != pipeline.EnginePocketsphinx && *asrName != pipeline.EngineWhisper {
		return usageErrorf("--asr %q: want %s or %s", *asrName, pipeline.EnginePocketsphinx, pipeline.EngineWhisper)
	}
	if *realistic && !flagSet(fs, "config") {
		*cfgPath = realisticConfig
	}
	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if *realistic {
		fmt.Fprintf(a.stdout, "bench: building or finding the %s shape (random weights, real cost)…\n", *shape)
		path, err := shapemodels.Ensure(ctx, *shape)
		if err != nil {
			return fmt.Errorf("--realistic: %w", err)
		}
		cfg.LLM.Engine, cfg.LLM.Model = pipeline.EngineLlama, path
	}
	var recogniser pipeline.RecogniserWrapper
	switch *asrName {
	case pipeline.EnginePocketsphinx:
		cfg.ASR.Engine = pipeline.EnginePocketsphinx
	case pipeline.EngineWhisper:
		if recogniser, err = realisticWhisper(ctx, a, &cfg, scenario); err != nil {
			return fmt.Errorf("--asr whisper: %w", err)
		}
	}
	if flagSet(fs, "max-tokens") {
		if *maxTokens < 0 {
			return usageErrorf("--max-tokens must not be negative")
		}
		cfg.LLM.MaxTokens = *maxTokens
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join(a.paths.Logs, "bench-"+time.Now().Format("20060102-150405"))
	}
	// Refused now rather than after minutes of runs.
	if err := regularfile.CheckOutput(filepath.Join(dir, "bench.json")); err != nil {
		return err
	}
	eng, err := pipeline.LoadEngines(cfg, a.log)
	if err != nil {
		return err
	}
	defer eng.Close()
	report := benchReport{Scenario: scenario, Config: from, Runs: *runs, Date: time.Now().UTC(), Realistic: *realistic, Laptop: *laptop,
		Machine: benchMachine{Cores: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0), Threads: cfg.Threads()},
		Models:  benchModels(cfg),
		Modes:   map[string]map[string]metrics.Stats{}, Turns: map[string][]metrics.Turn{}, CPU: map[string]metrics.CPU{},
		Speculation: map[string]metrics.Speculation{}, EchoCancellation: map[string]float64{}, SpeakerUnderruns: map[string]int64{}, VADMaxLagMS: map[string]float64{}}
	if *realistic {
		report.Shape = *shape
	}
	if recogniser != nil {
		report.ASRShape = shapemodels.WhisperTinyEn
	}
	var lb *bench.Live
	if *live {
		if lb, err = bench.StartLive(ctx, filepath.Join(dir, "pulse"), a.log); err != nil {
			return fmt.Errorf("--live: %w", err)
		}
		defer lb.Close()
		report.Live = &benchLive{Modes: map[string]map[string]metrics.Stats{}, Turns: map[string][]metrics.Turn{},
			MicDropped: map[string]int64{}, SpeakerUnderruns: map[string]int64{}, VADMaxLagMS: map[string]float64{}, Devices: map[string]bench.LiveDevices{}, Costs: map[string][]bench.LiveCost{}}
	}
	fmt.Fprintf(a.stdout, "bench: %s, %d real-time replay(s) per pipeline, config %s; threads: %s\n", scenario, *runs, from, report.Machine.Threads)
	if echo != nil {
		fmt.Fprintf(a.stdout, "bench: on a simulated laptop (echo %v after the speaker, %g dB, RT60 %v)\n", echo.Delay, echo.GainDB, echo.RT60)
	}
	for _, mode := range pipeline.Pipelines {
		if *only != "all" && *only != mode {
			continue
		}
		mcfg := pipeline.WithPipeline(cfg, mode)
		var turns []metrics.Turn
		var cpu metrics.CPU
		for i := 0; i < *runs; i++ {
			runDir := filepath.Join(dir, fmt.Sprintf("%s-%d", mode, i+1))
			res, err := pipeline.Replay(ctx, mcfg, eng, pipeline.ReplayOptions{Input: scenario, OutDir: runDir, RealClock: true, Logger: a.log, MeasureCPU: true, Echo: echo, Recogniser: recogniser})
			if err != nil {
				return fmt.Errorf("%s run %d: %w", mode, i+1, err)
			}
			turns = append(turns, res.Metrics...)
			cpu = cpu.Add(res.CPU)
			report.SpeakerUnderruns[mode] += res.SpeakerUnderruns
			report.VADMaxLagMS[mode] = max(report.VADMaxLagMS[mode], ms(res.VADMaxLag))
			if res.Speculation.Prepared > 0 {
				report.Speculation[mode] = report.Speculation[mode].Add(res.Speculation)
			}
			if res.AECCost.Audio > 0 {
				report.EchoCancellation[mode] = res.AECCost.RTF()
			}
			a.log.Info("bench run", zap.String("pipeline", mode), zap.Int("run", i+1), zap.Int("exchanges", len(res.Metrics)))
			fmt.Fprintf(a.stdout, "  %s run %d: %d exchanges\n", mode, i+1, len(res.Metrics))
		}
		report.Turns[mode] = turns
		report.Modes[mode] = metrics.Summarize(turns)
		report.CPU[mode] = cpu
		if lb == nil {
			continue
		}
		var liveTurns []metrics.Turn
		for i := 0; i < *runs; i++ {
			run, err := lb.Run(ctx, mcfg, eng, scenario, filepath.Join(dir, fmt.Sprintf("%s-live-%d", mode, i+1)))
			if err != nil {
				return fmt.Errorf("%s live run %d: %w", mode, i+1, err)
			}
			liveTurns = append(liveTurns, run.Result.Metrics...)
			report.Live.MicDropped[mode] += run.Result.MicDropped
			report.Live.SpeakerUnderruns[mode] += run.Result.SpeakerUnderruns
			report.Live.VADMaxLagMS[mode] = max(report.Live.VADMaxLagMS[mode], ms(run.Result.VADMaxLag))
			report.Live.Devices[mode] = run.Devices
			report.Live.Costs[mode] = run.Devices.Costs()
			fmt.Fprintf(a.stdout, "  %s live run %d: %d exchanges\n", mode, i+1, len(run.Result.Metrics))
		}
		report.Live.Turns[mode] = liveTurns
		report.Live.Modes[mode] = metrics.Summarize(liveTurns)
	}
	fmt.Fprintln(a.stdout)
	report.write(a.stdout)
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "bench.json")
	if err := regularfile.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s\n", path)
	return nil
}

// write prints the report's tables: latencies, prepared replies and CPU per pipeline, and
// how the pipelines' voice-to-voice times compare.
func (r benchReport) write(w io.Writer) {
	for _, mode := range pipeline.Pipelines {
		s, ok := r.Modes[mode]
		if !ok {
			continue
		}
		metrics.WriteTable(w, mode, s)
		if sp, ok := r.Speculation[mode]; ok {
			fmt.Fprintf(w, "  prepared replies: %s\n", sp)
		}
		fmt.Fprintf(w, "  speaker underruns: %d; the VAD behind its input: at most %.1f ms\n", r.SpeakerUnderruns[mode], r.VADMaxLagMS[mode])
		if c, ok := r.CPU[mode]; ok && c.Wall > 0 {
			metrics.WriteCPUTable(w, "  "+mode, c)
		}
		if e, ok := r.EchoCancellation[mode]; ok {
			fmt.Fprintf(w, "  echo cancellation: %.4f CPU s per audio s\n", e)
		}
		fmt.Fprintln(w)
	}
	if r.Live != nil {
		r.Live.write(w, r.Modes)
	}
	p50 := func(mode string) time.Duration { return r.Modes[mode][metrics.VoiceToVoice].P50 }
	if pred := p50(pipeline.Predictive); pred > 0 {
		for _, base := range []string{pipeline.Incremental, pipeline.TurnBased} {
			if b := p50(base); b > 0 {
				fmt.Fprintf(w, "voice-to-voice p50: predictive %.0f ms = %.2f × %s (%.0f ms)\n", ms(pred), float64(pred)/float64(b), base, ms(b))
			}
		}
	}
	fmt.Fprintf(w, "machine: %d cores; threads: %s\n", r.Machine.Cores, r.Machine.Threads)
	for _, role := range []string{"vad", "asr", "llm", "tts"} {
		fmt.Fprintf(w, "  %s: %s\n", role, r.Models[role])
	}
	if r.ASRShape != "" {
		fmt.Fprintf(w, "  asr: the shape of %s, random weights at their real cost; words from the scenario's transcript\n", r.ASRShape)
	}
}

// realisticWhisper points cfg's recogniser at a model of whisper tiny.en's shape (built
// into the cache by scripts/shape-models) and returns the hook that has it decode, at
// every decode the ASR module asks for, as many tokens as the words said so far take,
// and answer with those words from the scenario's transcript. Its other settings stay
// the configuration's (the default config's: threads from the thread plan, the hop
// asr.DefaultHop gives whisper).
func realisticWhisper(ctx context.Context, a *app, cfg *pipeline.Config, scenario string) (pipeline.RecogniserWrapper, error) {
	sc, err := source.LoadScenario(scenario)
	if err != nil {
		return nil, err
	}
	words, err := bench.ScenarioWords(sc)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%s: no recording says what it says (says:), so there are no words to answer with", scenario)
	}
	fmt.Fprintf(a.stdout, "bench: building or finding the %s shape (random weights, real cost); %d words of the scenario placed by forced alignment\n", shapemodels.WhisperTinyEn, len(words))
	path, err := shapemodels.Ensure(ctx, shapemodels.WhisperTinyEn)
	if err != nil {
		return nil, err
	}
	cfg.ASR.Engine, cfg.ASR.Whisper.Model = pipeline.EngineWhisper, path
	return bench.TranscriptRecogniser(words), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchModels names the engine and model of each role of cfg.
func benchModels(cfg pipeline.Config) map[string]string {
	// An engine and what it runs with (a model file, a server's URL).
	engine := func(key, name string) string {
		e, err := pipeline.FindEngine(key, name)
		if err != nil {
			return name
		}
		if uses := e.Uses(cfg); uses != "" {
			return e.Name + " " + uses
		}
		return e.Name
	}
	return map[string]string{
		"vad": "silero " + cfg.VAD.Model,
		"asr": engine(pipeline.KeyASREngine, cfg.ASR.Engine),
		"llm": engine(pipeline.KeyLLMEngine, cfg.LLM.Engine),
		"tts": "espeak-ng " + cfg.TTS.Voice,
	}
}

// write prints the live runs' latencies against the replays' (p50), with what the device
// path explains of the difference.
func (l *benchLive) write(w io.Writer, replay map[string]map[string]metrics.Stats) {
	for _, mode := range pipeline.Pipelines {
		s, ok := l.Modes[mode]
		if !ok {
			continue
		}
		metrics.WriteTable(w, mode+" (live, PulseAudio)", s)
		fmt.Fprintf(w, "  microphone frames dropped: %d, speaker underruns: %d; the VAD behind the microphone: at most %.1f ms\n",
			l.MicDropped[mode], l.SpeakerUnderruns[mode], l.VADMaxLagMS[mode])
		fmt.Fprintf(w, "  live − replay, p50:")
		for _, name := range metrics.Names {
			lv, ok1 := s[name]
			rv, ok2 := replay[mode][name]
			if ok1 && ok2 && !lv.Unmeasured && !rv.Unmeasured {
				fmt.Fprintf(w, " %s %+.0f ms", name, ms(lv.P50-rv.P50))
			}
		}
		fmt.Fprintln(w)
		for _, c := range l.Costs[mode] {
			fmt.Fprintf(w, "    %+.1f ms  %s (%s)\n", ms(c.Adds), c.Cause, strings.Join(c.Latencies, ", "))
		}
		fmt.Fprintln(w)
	}
}
