package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

func benchCommand() command {
	return command{
		Name:    "bench",
		Summary: "replay a scripted scenario N times in real time; p50/p90 of voice-to-voice and barge-in latency, incremental vs turn-based",
		Run:     runBench,
	}
}

// benchReport is what `agent bench` measured, as written to bench.json.
type benchReport struct {
	Scenario string                              `json:"scenario"`
	Config   string                              `json:"config"`
	Runs     int                                 `json:"runs"`
	Date     time.Time                           `json:"date"`
	Modes    map[string]map[string]metrics.Stats `json:"modes"`
	Turns    map[string][]metrics.Turn           `json:"turns"`
	// Speculation counts the replies each pipeline prepared ahead (predictive only).
	Speculation map[string]metrics.Speculation `json:"speculation,omitempty"`
}

func runBench(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "bench", "[SCENARIO.yaml]")
	cfgPath := configFlag(fs)
	runs := fs.Int("n", 3, "replays per pipeline")
	out := fs.String("o", "", "output directory for bench.json and the replays (default: bench-TIME in the logs directory)")
	maxTokens := fs.Int("max-tokens", 0, "reply length in tokens (default: the config's llm.max_tokens)")
	only := fs.String("pipeline", "all", "predictive, incremental, turn-based or all")
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
	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
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
	eng, err := pipeline.LoadEngines(cfg, a.log)
	if err != nil {
		return err
	}
	defer eng.Close()
	modes := []struct {
		name string
		cfg  pipeline.Config
	}{{pipeline.Predictive, pipeline.WithPipeline(cfg, pipeline.Predictive)}, {pipeline.Incremental, pipeline.WithPipeline(cfg, pipeline.Incremental)},
		{pipeline.TurnBased, pipeline.WithPipeline(cfg, pipeline.TurnBased)}}
	report := benchReport{Scenario: scenario, Config: from, Runs: *runs, Date: time.Now().UTC(),
		Modes: map[string]map[string]metrics.Stats{}, Turns: map[string][]metrics.Turn{}, Speculation: map[string]metrics.Speculation{}}
	fmt.Fprintf(a.stdout, "bench: %s, %d real-time replay(s) per pipeline, config %s\n", scenario, *runs, from)
	for _, m := range modes {
		if *only != "all" && *only != m.name {
			continue
		}
		var turns []metrics.Turn
		for i := 0; i < *runs; i++ {
			runDir := filepath.Join(dir, fmt.Sprintf("%s-%d", m.name, i+1))
			res, err := pipeline.Replay(ctx, m.cfg, eng, pipeline.ReplayOptions{Input: scenario, OutDir: runDir, RealClock: true, Logger: a.log})
			if err != nil {
				return fmt.Errorf("%s run %d: %w", m.name, i+1, err)
			}
			turns = append(turns, res.Metrics...)
			if res.Speculation.Prepared > 0 {
				report.Speculation[m.name] = report.Speculation[m.name].Add(res.Speculation)
			}
			a.log.Info("bench run", zap.String("pipeline", m.name), zap.Int("run", i+1), zap.Int("exchanges", len(res.Metrics)))
			fmt.Fprintf(a.stdout, "  %s run %d: %d exchanges\n", m.name, i+1, len(res.Metrics))
		}
		report.Turns[m.name] = turns
		report.Modes[m.name] = metrics.Summarize(turns)
	}
	fmt.Fprintln(a.stdout)
	for _, m := range modes {
		if s, ok := report.Modes[m.name]; ok {
			metrics.WriteTable(a.stdout, m.name, s)
			if sp, ok := report.Speculation[m.name]; ok {
				fmt.Fprintf(a.stdout, "  prepared replies: %s\n", sp)
			}
			fmt.Fprintln(a.stdout)
		}
	}
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "bench.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s\n", path)
	return nil
}
