package pipeline

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
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
	// Console shows the conversation (nil: no console). Share it with the logger's
	// console output (Terminal.LogWriter) so that log lines do not break its lines.
	Console *console.Terminal
	// OnListening, when set, is called once the microphone and the speakers are both
	// open: the agent listens from then on. A session whose devices fail to open never
	// calls it.
	OnListening func()
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
	// MicDropped counts the capture frames (at the device's rate) the microphone
	// dropped because the pipeline fell behind.
	MicDropped int64
	// Microphone and Speakers are the devices as they last opened (zero when one never
	// did): the device, its format and the stream latency PortAudio reported.
	Microphone mic.Opened
	Speakers   portaudio.Opened
}

// Live runs the agent on the microphone and the speakers until ctx is cancelled (then
// every module finishes what it holds and the session is saved).
//
// When the session ran and then failed (a device was lost), Live returns the error with
// a result: what the session left, and where it was saved (the history is saved after
// every change, so what was said before the failure is kept).
func Live(ctx context.Context, cfg Config, eng *Engines, opts LiveOptions) (*LiveResult, error) {
	// Each device's first open counts (the microphone opens again after a loss); the
	// second of the two announces that the agent listens.
	var toOpen atomic.Int32
	toOpen.Store(2)
	var inOpen, outOpen sync.Once
	deviceOpened := func(once *sync.Once) {
		once.Do(func() {
			if toOpen.Add(-1) == 0 && opts.OnListening != nil {
				opts.OnListening()
			}
		})
	}
	// What the devices opened, written on their modules' goroutines.
	var opened struct {
		sync.Mutex
		mic      mic.Opened
		speakers portaudio.Opened
	}
	in, err := mic.New(NameInput, mic.Config{Device: cfg.Audio.Input, FrameDuration: cfg.Audio.Frame, Latency: cfg.Audio.InputLatency,
		OnOpen: func(o mic.Opened) {
			opened.Lock()
			opened.mic = o
			opened.Unlock()
			deviceOpened(&inOpen)
		}})
	if err != nil {
		return nil, err
	}
	echo := ResolveEchoCancel(ctx, cfg.Audio)
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log.Named(NameAEC).Info("echo cancellation", zap.Bool("on", echo.Decision.On), zap.String("why", echo.Decision.Reason),
		zap.String("engine", cfg.Audio.EchoEngine), zap.Strings("unknown", echo.Problems))
	spkCfg := portaudio.Config{Device: cfg.Audio.Output, Latency: cfg.Audio.OutputLatency, OnOpen: func(o portaudio.Opened) {
		opened.Lock()
		opened.speakers = o
		opened.Unlock()
		deviceOpened(&outOpen)
	}}
	spkCfg.Played = echo.Decision.On
	out, err := portaudio.New(NameSpeaker, spkCfg)
	if err != nil {
		return nil, err
	}
	aio := IO{Input: in, Speaker: out, Clock: clock.Real{}, Logger: opts.Logger, Timeline: opts.Timeline,
		SessionDir: opts.SessionDir, Observers: opts.Observers, OnMetrics: opts.OnMetrics, EchoCancel: echo.Decision.On}
	if opts.Console != nil {
		aio.Console = console.New(NameConsole, opts.Console)
	}
	// The network outlives ctx by its graceful stop; building it must not be cut short.
	agent, err := Build(context.WithoutCancel(ctx), cfg, eng, aio)
	if err != nil {
		return nil, err
	}
	defer agent.Close()
	began := time.Now()
	runErr := agent.Run(ctx)
	res := &LiveResult{Duration: time.Since(began), Echo: echo, MicDropped: in.Dropped()}
	opened.Lock()
	res.Microphone, res.Speakers = opened.mic, opened.speakers
	opened.Unlock()
	if agent.AEC != nil {
		res.AECCost = agent.AEC.Cost()
	}
	var err2 error
	res.Outcome, err2 = agent.outcome(context.WithoutCancel(ctx))
	if runErr != nil {
		// The history's saves are done once the store is closed.
		agent.Close()
		return res, runErr
	}
	if err2 != nil {
		return nil, err2
	}
	return res, nil
}
