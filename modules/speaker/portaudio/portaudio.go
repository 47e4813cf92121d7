// Package portaudio is the speaker module's sound-device output: it plays through a
// PortAudio device (engines/portaudio) in real time and derives what the listener hears from
// the device's own timing. Package speaker stays pure Go; pipeline opens this output for
// live sessions.
package portaudio

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	pa "github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/speaker"
	"go.uber.org/zap"
)

// Config configures the device speaker.
type Config struct {
	speaker.Options `yaml:",inline"`
	// Device names the output device: a name, a case-insensitive part of one, or an
	// index from 'agent devices' (see pa.Select); empty for the default output.
	Device string `yaml:"device" json:"device"`
	// Rate is the device rate; 0 for the device's default rate.
	Rate int `yaml:"rate" json:"rate"`
	// Channels is the channel count; 0 for mono if the device takes it, else stereo.
	Channels int `yaml:"channels" json:"channels"`
	// Latency is the suggested output latency (DefaultLatency when zero). Lower makes Pause and
	// Interrupt tighter; too low for the machine makes the audio break up.
	Latency time.Duration `yaml:"latency" json:"latency"`
	// FramesPerBuffer fixes the callback size; 0 lets the host choose.
	FramesPerBuffer int `yaml:"frames_per_buffer" json:"frames_per_buffer"`
	// NormalPriority keeps PortAudio's callback thread at normal priority.
	NormalPriority bool `yaml:"normal_priority" json:"normal_priority"`
	// OnOpen, when set, is called (on the module's goroutine) once the output stream
	// has started, with what was opened.
	OnOpen func(Opened) `yaml:"-" json:"-"`
	// Host configures PortAudio (Verbose keeps ALSA's and JACK's diagnostics).
	Host pa.Options `yaml:"-" json:"-"`
}

// Opened is what the speaker opened: the device, the output format and the output
// latency PortAudio reported for the stream (zero when it did not say), which the
// speaker takes for the listener's delay where the callback's DAC time is missing.
type Opened struct {
	Device, HostAPI string
	Rate, Channels  int
	Latency         time.Duration
}

// DefaultLatency is the output latency the speaker suggests to its device unless
// configured otherwise (the agent's audio.output_latency).
const DefaultLatency = 50 * time.Millisecond

// New returns a speaker module that plays through a PortAudio output device in real
// time. It needs the real clock.
func New(name string, cfg Config) (*speaker.Speaker, error) {
	cfg.Options = cfg.Options.WithDefaults()
	if cfg.Latency == 0 {
		cfg.Latency = DefaultLatency
	}
	if cfg.Latency < 0 || cfg.Rate < 0 || cfg.Channels < 0 || cfg.FramesPerBuffer < 0 {
		return nil, fmt.Errorf("speaker: negative latency, rate, channels or frames per buffer in %+v", cfg)
	}
	// The device takes a whole buffer (up to the latency) at a time: the ring must hold
	// more than that, or every callback would run dry.
	cfg.Lead = max(cfg.Lead, cfg.Latency+2*cfg.Step)
	return speaker.New(name, cfg.Options, func() speaker.Output { return &deviceOutput{cfg: cfg} })
}

// deviceOutput plays through PortAudio. Its callback is the renderer (see speaker.Ring):
// it renders from the ring and publishes, after every buffer, when that buffer's first frame reaches
// the listener.
type deviceOutput struct {
	cfg     Config
	log     *zap.Logger
	base    time.Time // the module's start, with the monotonic reading the callback measures from
	host    *pa.Host
	scfg    pa.StreamConfig
	stream  *pa.Stream
	outRate int
	post    func(any) bool // Ports.TryPost: never blocks

	// anchor is written by the callback only: the time (nanoseconds since base) at which
	// the listener hears device frame 0 if the stream has played continuously since —
	// the time a buffer's first frame reaches the listener (callback time plus the DAC
	// time PortAudio reports ahead of it) minus that frame's duration from 0, the
	// earliest of the last anchorWindow's buffers. One atomic word, so the module never
	// reads a torn value. anchorSet tells whether a callback has run.
	anchor    atomic.Int64
	anchorSet atomic.Bool
	closed    bool
}

func (d *deviceOutput) Open(ctx context.Context, p *iu.Ports, start time.Time) (int, error) {
	if _, virtual := p.Clock().(clock.Scheduler); virtual {
		return 0, errors.New("speaker: the device speaker plays in real time and needs the real clock; use the file speaker on a virtual clock")
	}
	d.log = p.Logger()
	d.base = start
	d.post = p.TryPost
	host, err := pa.Open(d.cfg.Host)
	if err != nil {
		return 0, fmt.Errorf("speaker: %w", err)
	}
	dev, err := host.Find(d.cfg.Device, pa.Output)
	if err != nil {
		host.Close()
		return 0, fmt.Errorf("speaker: %w", err)
	}
	scfg, err := host.Negotiate(pa.StreamConfig{
		Device: dev, Channels: d.cfg.Channels, SampleRate: float64(d.cfg.Rate),
		Latency: d.cfg.Latency, FramesPerBuffer: d.cfg.FramesPerBuffer, NormalPriority: d.cfg.NormalPriority,
	}, pa.Output)
	if err != nil {
		host.Close()
		return 0, fmt.Errorf("speaker: %w", err)
	}
	if scfg.SampleRate != float64(int(scfg.SampleRate)) {
		host.Close()
		return 0, fmt.Errorf("speaker: device %q runs at a fractional rate %g Hz", dev.Name, scfg.SampleRate)
	}
	// Wake the module when the stream ends on its own (the device went away).
	scfg.OnFinished = func() { d.post(outputEvent{}) }
	d.host, d.scfg, d.outRate = host, scfg, int(scfg.SampleRate)
	return d.outRate, nil
}

// anchorWindow is how long the output's timing remembers an early estimate. A callback
// that runs late (a loaded machine, a garbage collection holding the audio thread) times
// its buffer late by as much, so the earliest estimate of the last second is the
// stream's timing; a sound server that grows its buffer without an underflow is
// followed a second later.
const anchorWindow = time.Second

// anchorWarmup is how long after the stream starts the latest estimate stands: while the
// sound server fills its buffer the first buffers' estimates come early, so the earliest
// of them would be wrong for a second.
const anchorWarmup = 500 * time.Millisecond

// outputEvent wakes the module: the renderer applied a request, or the stream finished.
type outputEvent struct{}

func (d *deviceOutput) Begin(r *speaker.Ring) error {
	// Wake the module when the callback has applied a control request, so that Pause
	// and Interrupt are reported one buffer after they took effect, not a step later.
	r.SetNotify(func() { d.post(outputEvent{}) })
	rend := speaker.NewRenderer(r)
	rate := int64(d.outRate)
	base := d.base
	// fallback stands in for the callback's DAC time on hosts that do not report it: the
	// stream's nominal output latency, known once it is open.
	var fallback atomic.Int64
	timing := audio.Earliest{Window: anchorWindow} // the callback's own
	warmUntil := time.Duration(-1)                 // before it, the latest estimate stands
	stream, err := d.host.OpenOutput(d.scfg, func(out []float32, frames int, t pa.Timing, flags pa.Flags) {
		now := time.Since(base) // before rendering, which takes its time
		first := rend.Frame()
		rend.Render(out, frames, len(out)/frames)
		ahead := t.OutputDAC - t.Current
		if t.OutputDAC == 0 || ahead < 0 {
			ahead = time.Duration(fallback.Load())
		}
		if warmUntil < 0 || flags&pa.OutputUnderflow != 0 {
			// The stream starts, or starts again after missing buffers (everything plays
			// later from now on): its latency builds up.
			warmUntil = now + anchorWarmup
		}
		if now < warmUntil {
			timing.Reset()
		}
		// When this buffer's first frame reaches the listener, on the module's clock.
		heard := now + ahead
		timing.Note(heard, heard-time.Duration(first*int64(time.Second)/rate))
		anchor, _ := timing.Min()
		d.anchor.Store(int64(anchor))
		d.anchorSet.Store(true)
	})
	if err != nil {
		return fmt.Errorf("speaker: %w", err)
	}
	fallback.Store(int64(stream.Info().OutputLatency))
	d.stream = stream
	if err := stream.Start(); err != nil {
		return fmt.Errorf("speaker: %w", err)
	}
	opened := Opened{Device: stream.Device().Name, HostAPI: stream.Device().HostAPI, Rate: d.outRate, Channels: stream.Channels(),
		Latency: stream.Info().OutputLatency}
	d.log.Info("speaker output open",
		zap.String("device", opened.Device), zap.String("host_api", opened.HostAPI),
		zap.Int("rate", opened.Rate), zap.Int("channels", opened.Channels),
		zap.Duration("output_latency", opened.Latency))
	if d.cfg.OnOpen != nil {
		d.cfg.OnOpen(opened)
	}
	return nil
}

func (d *deviceOutput) Rate() int { return d.outRate }

func (d *deviceOutput) Advance(time.Time) error { return nil }

// Kick does nothing: the callback applies requests at its next buffer, and wakes the
// module through the ring's notify.
func (d *deviceOutput) Kick() {}

func (d *deviceOutput) HeardFrame(now time.Time) int64 {
	if !d.anchorSet.Load() {
		return 0
	}
	since := now.Sub(d.base) - time.Duration(d.anchor.Load())
	return max(0, int64(since)*int64(d.outRate)/int64(time.Second))
}

func (d *deviceOutput) FrameTime(f int64) time.Time {
	return d.base.Add(time.Duration(d.anchor.Load() + f*int64(time.Second)/int64(d.outRate)))
}

func (d *deviceOutput) Failed() error {
	if d.stream == nil {
		return nil
	}
	select {
	case <-d.stream.Finished():
		return d.stream.Err()
	default:
		return nil
	}
}

func (d *deviceOutput) Close(drain bool) error {
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	if d.stream != nil {
		if drain && d.stream.Err() == nil {
			// Stop plays out what the device holds (silence by now) before returning.
			if err := d.stream.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := d.stream.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.host != nil {
		if err := d.host.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("speaker: %w", err)
	}
	return nil
}
