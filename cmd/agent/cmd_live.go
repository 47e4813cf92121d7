package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
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
	sf := addSessionFlags(fs)
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	sessionDir, rest, err := sf.apply(&cfg, rest)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("live takes no arguments (got %q)", rest)
	}
	if *duration < 0 {
		return usageErrorf("--duration %v must not be negative (0: until Ctrl-C)", *duration)
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
	// The timeline is written only as a regular file: say so before the session starts.
	if err := regularfile.CheckOutput(*timelinePath); err != nil {
		return fmt.Errorf("--timeline: %w", err)
	}
	if cfg.Session.Resume {
		sayResumed(a.stdout, sessionDir)
	}
	a.log.Info("live", zap.String("config", from), zap.String("input", cfg.Audio.Input), zap.String("output", cfg.Audio.Output),
		zap.String("session", sessionDir), zap.Bool("resume", cfg.Session.Resume))
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
	tl := &lazyFile{path: *timelinePath}
	var listening atomic.Bool
	res, err := pipeline.Live(runCtx, cfg, eng, pipeline.LiveOptions{Console: a.term, Timeline: tl, Logger: a.log, SessionDir: sessionDir,
		OnListening: func() {
			listening.Store(true)
			a.term.Note("Listening. Speak to the agent; interrupt it whenever you like. Ctrl-C ends the session.")
		}})
	if cerr := tl.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("timeline: %w", cerr)
	}
	if err != nil {
		if !listening.Load() {
			// The devices never opened: there is no session to look at.
			tl.Remove()
		}
		if res != nil {
			return fmt.Errorf("%w\n%s", err, sessionNote(res.SessionDir))
		}
		return err
	}
	fmt.Fprintln(a.stdout)
	metrics.WriteTable(a.stdout, "latencies", metrics.Summarize(res.Metrics))
	fmt.Fprintf(a.stdout, "\n%s\n", sessionNote(res.SessionDir))
	if tl.created() {
		fmt.Fprintf(a.stdout, "timeline in %s (plot it with 'agent plot')\n", tl.path)
	}
	return nil
}

// sessionNote says where a live session was saved and how to continue it, or that
// nothing was (a session in which nobody spoke is not saved).
func sessionNote(dir string) string {
	if dir == "" {
		return "sessions are off (no session.dir in the config): nothing was saved"
	}
	if _, err := os.Lstat(filepath.Join(dir, dialogue.SessionFile)); err != nil {
		return "nothing was said: no session was saved"
	}
	return fmt.Sprintf("the session is saved in %s (continue it with 'agent live --resume %s')", dir, filepath.Base(dir))
}

// lazyFile is a regular file created at its first write, so that a session that never
// started leaves no empty file behind.
type lazyFile struct {
	path string
	f    *os.File
	err  error
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.f == nil && l.err == nil {
		if l.err = os.MkdirAll(filepath.Dir(l.path), 0o755); l.err == nil {
			l.f, l.err = regularfile.Create(l.path, 0o644)
		}
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.f.Write(p)
}

func (l *lazyFile) created() bool { return l.f != nil }

// Close closes the file if it was created.
func (l *lazyFile) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

// Remove deletes the file if it was created (Create made it a regular file).
func (l *lazyFile) Remove() {
	if l.f != nil {
		_ = os.Remove(l.path)
	}
}
