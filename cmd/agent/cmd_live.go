package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
	"golang.org/x/term"
)

func liveCommand() command {
	return command{
		Name:     "live",
		Summary:  "talk with the agent through the microphone and the speakers (Ctrl-C ends the session)",
		Run:      runLive,
		LogLevel: "warn",
	}
}

func runLive(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "live", "")
	cfgPath := configFlag(fs)
	input := fs.String("input", "", "microphone: device name, part of a name, or index (see 'agent devices'); overrides the config")
	output := fs.String("output", "", "speakers: device name, part of a name, or index; overrides the config")
	duration := fs.Duration("duration", 0, "end the session after this long (0: at Ctrl-C)")
	timelinePath := fs.String("timeline", "", "write the session's timeline here (default: live-TIME.jsonl in the logs directory)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if *input != "" {
		cfg.Audio.Input = *input
	}
	if *output != "" {
		cfg.Audio.Output = *output
	}
	if *timelinePath == "" {
		*timelinePath = filepath.Join(a.paths.Logs, "live-"+time.Now().Format("20060102-150405")+".jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(*timelinePath), 0o755); err != nil {
		return err
	}
	tl, err := os.Create(*timelinePath)
	if err != nil {
		return err
	}
	defer tl.Close()
	a.log.Info("live", zap.String("config", from), zap.String("input", cfg.Audio.Input), zap.String("output", cfg.Audio.Output))
	eng, err := pipeline.LoadEngines(cfg, a.log)
	if err != nil {
		return err
	}
	defer eng.Close()
	runCtx := ctx
	if *duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	tty := false
	if f, ok := a.stdout.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	fmt.Fprintln(a.stdout, "Listening. Speak to the agent; interrupt it whenever you like. Ctrl-C ends the session.")
	res, err := pipeline.Live(runCtx, cfg, eng, pipeline.LiveOptions{Console: a.stdout, ConsoleTTY: tty, Timeline: tl, Logger: a.log})
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	metrics.WriteTable(a.stdout, "latencies", metrics.Summarize(res.Metrics))
	fmt.Fprintf(a.stdout, "\nsession saved in %s; timeline in %s (plot it with 'agent plot')\n", res.SessionDir, *timelinePath)
	return nil
}
