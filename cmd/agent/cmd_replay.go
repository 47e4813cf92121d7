package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

func replayCommand() command {
	return command{
		Name:     "replay",
		Summary:  "run the agent on a recording or a scenario; write what a listener heard, the transcript, the session and the timeline",
		Run:      runReplay,
		LogLevel: "warn",
	}
}

func runReplay(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "replay", "SCENARIO.yaml|FILE.wav")
	cfgPath := configFlag(fs)
	out := fs.String("o", "", "output directory (default: replays/NAME-TIME in the logs directory)")
	clockName := fs.String("clock", "virtual", "virtual (as fast as possible, deterministic) or real (real time, real latencies)")
	pipe := fs.String("pipeline", "", "predictive, incremental or turn-based (default: the config's, predictive)")
	laptop := fs.Bool("laptop", false, "replay on a simulated laptop whose speakers reach its microphone (30 ms, −6 dB, RT60 300 ms) in place of the scenario's echo block; echo cancellation as audio.echo_cancel says (auto: on)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("replay needs one scenario or WAV file")
	}
	if *clockName != "virtual" && *clockName != "real" {
		return usageErrorf("--clock must be virtual or real")
	}
	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if *pipe != "" {
		if !slices.Contains(pipeline.Pipelines, *pipe) {
			return usageErrorf("--pipeline must be one of %s", strings.Join(pipeline.Pipelines, ", "))
		}
		cfg = pipeline.WithPipeline(cfg, *pipe)
	}
	dir := *out
	if dir == "" {
		name := strings.TrimSuffix(filepath.Base(rest[0]), filepath.Ext(rest[0]))
		dir = filepath.Join(a.paths.Logs, "replays", name+"-"+time.Now().Format("20060102-150405"))
	}
	a.log.Info("replay", zap.String("input", rest[0]), zap.String("config", from), zap.String("output", dir), zap.String("clock", *clockName))
	if err := pipeline.CheckReplayOutputs(dir); err != nil {
		return err
	}
	eng, err := pipeline.LoadEngines(cfg, a.log)
	if err != nil {
		return err
	}
	defer eng.Close()
	opts := pipeline.ReplayOptions{Input: rest[0], OutDir: dir, RealClock: *clockName == "real", Console: a.stdout, Record: true, Logger: a.log}
	if *laptop {
		echo := room.Laptop()
		opts.Echo = &echo
	}
	res, err := pipeline.Replay(ctx, cfg, eng, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nreplayed %s in %v (wall clock", rest[0], res.Wall.Round(time.Millisecond))
	if peak := peakMemory(); peak > 0 {
		fmt.Fprintf(a.stdout, "; peak memory %d MiB", peak>>20)
	}
	fmt.Fprintln(a.stdout, ")")
	metrics.WriteTable(a.stdout, "latencies ("+*clockName+" clock)", metrics.Summarize(res.Metrics))
	if res.Speculation.Prepared > 0 {
		fmt.Fprintf(a.stdout, "prepared replies: %s\n", res.Speculation)
	}
	fmt.Fprintf(a.stdout, "\nwrote %s: heard.wav (user + agent), agent.wav, user.wav, transcript.txt, timeline.jsonl, timeline.svg, metrics.json, session/\n", dir)
	return nil
}
