package pipeline

import (
	"context"
	"io"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/console"
	"github.com/parley-voice/parley/modules/mic"
	"github.com/parley-voice/parley/modules/speaker/portaudio"
	"go.uber.org/zap"
)

// LiveOptions are the settings of a live session.
type LiveOptions struct {
	// Console shows the conversation; ConsoleTTY redraws the line in progress in place.
	Console    io.Writer
	ConsoleTTY bool
	// Timeline receives every update as JSON lines (optional).
	Timeline io.Writer
	// SessionDir overrides where the session is saved.
	SessionDir string
	Logger     *zap.Logger
	Observers  []iu.Observer
	OnMetrics  func(metrics.Turn)
}

// LiveResult is what a live session left.
type LiveResult struct {
	Outcome
	Duration time.Duration
	// Echo is whether echo was cancelled and why.
	Echo EchoSetup
	// AECCost is what echo cancellation cost (zero when it was off).
	AECCost aec.Cost
}

// Live runs the agent on the microphone and the speakers until ctx is cancelled (then
// every module finishes what it holds and the session is saved).
func Live(ctx context.Context, cfg Config, eng *Engines, opts LiveOptions) (*LiveResult, error) {
	in, err := mic.New(NameInput, mic.Config{Device: cfg.Audio.Input, FrameDuration: cfg.Audio.Frame, Latency: cfg.Audio.InputLatency})
	if err != nil {
		return nil, err
	}
	echo := ResolveEchoCancel(ctx, cfg.Audio)
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log.Info("echo cancellation", zap.Bool("on", echo.Decision.On), zap.String("why", echo.Decision.Reason),
		zap.String("engine", cfg.Audio.EchoEngine), zap.Strings("unknown", echo.Problems))
	spkCfg := portaudio.Config{Device: cfg.Audio.Output, Latency: cfg.Audio.OutputLatency}
	spkCfg.Played = echo.Decision.On
	out, err := portaudio.New(NameSpeaker, spkCfg)
	if err != nil {
		return nil, err
	}
	aio := IO{Input: in, Speaker: out, Clock: clock.Real{}, Logger: opts.Logger, Timeline: opts.Timeline,
		SessionDir: opts.SessionDir, Observers: opts.Observers, OnMetrics: opts.OnMetrics, EchoCancel: echo.Decision.On}
	if opts.Console != nil {
		aio.Console = console.New(NameConsole, opts.Console, opts.ConsoleTTY)
	}
	// The network outlives ctx by its graceful stop; building it must not be cut short.
	agent, err := Build(context.WithoutCancel(ctx), cfg, eng, aio)
	if err != nil {
		return nil, err
	}
	defer agent.Close()
	began := time.Now()
	if err := agent.Run(ctx); err != nil {
		return nil, err
	}
	res := &LiveResult{Duration: time.Since(began), Echo: echo}
	if agent.AEC != nil {
		res.AECCost = agent.AEC.Cost()
	}
	if res.Outcome, err = agent.outcome(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	return res, nil
}
