// Package mic is the microphone module: it captures a PortAudio input device in real
// time and emits the audio as audio.Frame IUs in the pipeline's format (16 kHz mono
// float32), each ADDed and COMMITted in one batch, with Start positions that count
// samples of the capture stream.
//
// Capture runs at the device's own rate and channel count (mono when the device or its
// sound server can deliver it, else stereo); the module down-mixes and resamples with
// the audio package's resampler.
//
// Drop policy. PortAudio's callback thread hands each captured buffer to the module with
// Ports.TryPost, which never blocks: the audio thread must never wait for the pipeline.
// When the module falls behind — its local queue is full, or every capture buffer
// (Config.Queue worth of audio) is still waiting — the newest audio is dropped, counted
// (Dropped) and logged, at most once a second. The dropped stretch leaves a gap in the
// Start positions: the frames after it start where that audio would have been, so
// downstream stream time stays true to the microphone's timeline.
//
// When the device fails or disappears (the sound server dies, a USB microphone is
// unplugged), or a stream that delivered audio stops delivering for stallIsLoss (4 s),
// everything captured before is still delivered, and then the module either
// stops the network with an error wrapping portaudio.ErrStreamFailed, or, with
// Config.ContinueOnDeviceLoss, logs the loss, emits silence in real time so that the
// stream goes on, and tries to reopen the device every Config.ReopenInterval.
package mic

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// Config configures the microphone.
type Config struct {
	// Device names the input device: a name, a case-insensitive part of one, an index
	// from 'agent devices', or one of the sound server's sources by name or description
	// (see portaudio.SelectFrom); empty for the default input.
	Device string `yaml:"device" json:"device"`
	// Rate is the capture rate; 0 for the device's default (native) rate.
	Rate int `yaml:"rate" json:"rate"`
	// Channels is the capture channel count; 0 for mono if the device takes it, else
	// stereo.
	Channels int `yaml:"channels" json:"channels"`
	// Latency is the suggested input latency (DefaultLatency when zero).
	Latency time.Duration `yaml:"latency" json:"latency"`
	// FramesPerBuffer fixes the callback size; 0 lets the host choose.
	FramesPerBuffer int `yaml:"frames_per_buffer" json:"frames_per_buffer"`
	// FrameDuration is the length of the emitted audio frames (0:
	// audio.DefaultFrameDuration).
	FrameDuration time.Duration `yaml:"frame_duration" json:"frame_duration"`
	// Queue is how much captured audio may wait for the module before the newest is
	// dropped (500 ms). The module's local queue bounds it too: it holds the network's
	// inbox size (64) of callback buffers, 640 ms at the 10 ms buffers of a 40 ms
	// latency.
	Queue time.Duration `yaml:"queue" json:"queue"`
	// ContinueOnDeviceLoss keeps the module running when the device goes away: it
	// emits silence and tries to reopen the device. Without it the loss stops the network.
	ContinueOnDeviceLoss bool `yaml:"continue_on_device_loss" json:"continue_on_device_loss"`
	// ReopenInterval is how often a lost device is tried again (1 s).
	ReopenInterval time.Duration `yaml:"reopen_interval" json:"reopen_interval"`
	// StartupGrace is how long a device that was just opened may take to deliver its
	// first audio before the module warns (5 s). Sound servers take a while: PulseAudio's
	// monitor of an idle null sink delivers its first audio about two seconds after a
	// recording starts, and a Bluetooth headset switching to its microphone profile
	// takes seconds too. Once audio flows, a second without any is worth a warning.
	StartupGrace time.Duration `yaml:"startup_grace" json:"startup_grace"`
	// NormalPriority keeps PortAudio's callback thread at normal priority.
	NormalPriority bool `yaml:"normal_priority" json:"normal_priority"`
	// OnOpen, when set, is called (on the module's goroutine) each time the capture
	// stream has started, with what was opened: at the start, and after a lost device
	// was opened again.
	OnOpen func(Opened) `yaml:"-" json:"-"`
	// Quality is the resampler's quality.
	Quality audio.Quality `yaml:"-" json:"-"`
	// Host configures PortAudio (Verbose keeps ALSA's and JACK's diagnostics).
	Host portaudio.Options `yaml:"-" json:"-"`
}

// DefaultLatency is the input latency a microphone suggests to its device unless
// configured otherwise.
const DefaultLatency = 20 * time.Millisecond

func (c Config) withDefaults() Config {
	if c.Latency == 0 {
		c.Latency = DefaultLatency
	}
	if c.FrameDuration == 0 {
		c.FrameDuration = audio.DefaultFrameDuration
	}
	if c.Queue == 0 {
		c.Queue = 500 * time.Millisecond
	}
	if c.ReopenInterval == 0 {
		c.ReopenInterval = time.Second
	}
	if c.StartupGrace == 0 {
		c.StartupGrace = 5 * time.Second
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Rate < 0 || c.Channels < 0 || c.Latency < 0 || c.FramesPerBuffer < 0 || c.Queue < 0 || c.ReopenInterval < 0 || c.StartupGrace < 0 {
		errs = append(errs, errors.New("mic: negative rate, channels, latency, frames per buffer, queue, reopen interval or startup grace"))
	}
	if n := audio.DurationToSamples(c.FrameDuration, audio.PipelineRate); n < 1 || c.FrameDuration > time.Second {
		errs = append(errs, fmt.Errorf("mic: frame duration %v outside (0, 1s]", c.FrameDuration))
	}
	return errors.Join(errs...)
}

// Opened is what the microphone opened: the device, the capture format and the input
// latency PortAudio reported for the stream (zero when it did not say).
type Opened struct {
	Device, HostAPI string
	// ServerSource is the sound server's source the device records from when the
	// configuration named one ("" otherwise).
	ServerSource   string
	Rate, Channels int
	Latency        time.Duration
}

// Mic is the microphone module.
type Mic struct {
	name    string
	cfg     Config
	dropped atomic.Int64 // capture frames dropped, counted by the callback
}

// New returns a microphone module.
func New(name string, cfg Config) (*Mic, error) {
	if name == "" {
		name = "mic"
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Mic{name: name, cfg: cfg}, nil
}

// Name implements iu.Module.
func (m *Mic) Name() string { return m.name }

// Dropped returns how many capture frames (at the device rate) were dropped because
// the pipeline fell behind. It is safe to call while the module runs.
func (m *Mic) Dropped() int64 { return m.dropped.Load() }

// Run implements iu.Module: it captures until the network stops or its context ends.
func (m *Mic) Run(ctx context.Context, p *iu.Ports) error {
	if _, virtual := p.Clock().(clock.Scheduler); virtual {
		return errors.New("mic: the microphone captures in real time and needs the real clock; replay recordings with modules/source instead")
	}
	r := &runner{m: m, p: p, log: p.Logger(), frameLen: int(audio.DurationToSamples(m.cfg.FrameDuration, audio.PipelineRate)), began: p.Now(),
		clock: newCaptureClock()}
	defer r.closeCapture()
	if err := r.openCapture(); err != nil {
		return err
	}
	return r.loop(ctx)
}

// block is one stretch of captured audio handed from the callback to the module. Blocks
// circulate between a free list and the module, so the callback never allocates.
type block struct {
	gen     uint64 // the capture (open) it belongs to
	samples []float32
	frames  int
	pos     int64 // device frame of the first sample, counted from the capture's start
	flags   portaudio.Flags
	// captured is when the first sample reached the converter (PortAudio's ADC time),
	// as a duration since the module started.
	captured time.Duration
}

// lost is posted by the stream's finished callback.
type lost struct{ gen uint64 }

// capture is one open input stream and what its callback owns.
type capture struct {
	gen      uint64
	host     *portaudio.Host
	stream   *portaudio.Stream
	rate     int
	channels int
	free     chan *block
	// pos is the callback's device frame counter; only the callback touches it.
	pos int64
}

type runner struct {
	m        *Mic
	p        *iu.Ports
	log      *zap.Logger
	frameLen int

	cap  *capture
	gen  uint64
	conv *converter

	// Output position and the frame being filled.
	next  int64 // pipeline position of the next sample to emit
	frame []float32
	start int64 // pipeline position of frame[0]

	// The capture clock, which stamps the frames (audio.Frame.Captured): durations are
	// since began, the module's start.
	began time.Time
	clock captureClock

	lastBlock   time.Time // when the last capture block arrived (or the capture opened)
	checkedAt   time.Time // when the watchdog last found no audio
	delivering  bool      // the current capture has delivered audio
	stallLogged bool
	lostAt      time.Time // when the device was lost (zero while capturing)
	silenceNext time.Time // when the next silence frame is due
	reopenAt    time.Time

	lastDropLog time.Time
	loggedDrops int64
	overflows   int
}

func (r *runner) openCapture() error {
	cfg := r.m.cfg
	host, err := portaudio.Open(cfg.Host)
	if err != nil {
		return fmt.Errorf("mic: %w", err)
	}
	dev, err := host.Find(cfg.Device, portaudio.Input)
	if err != nil {
		host.Close()
		return fmt.Errorf("mic: %w", err)
	}
	scfg, err := host.Negotiate(portaudio.StreamConfig{
		Device: dev, Channels: cfg.Channels, SampleRate: float64(cfg.Rate),
		Latency: cfg.Latency, FramesPerBuffer: cfg.FramesPerBuffer, NormalPriority: cfg.NormalPriority,
	}, portaudio.Input)
	if err != nil {
		host.Close()
		return fmt.Errorf("mic: %w", err)
	}
	if scfg.SampleRate != float64(int(scfg.SampleRate)) {
		host.Close()
		return fmt.Errorf("mic: device %q runs at a fractional rate %g Hz", dev.Name, scfg.SampleRate)
	}
	r.gen++
	r.clock.reset() // a new capture has a clock of its own
	c := &capture{gen: r.gen, host: host, rate: int(scfg.SampleRate), channels: scfg.Channels}
	// One block per callback: PortAudio's hosts call back about every quarter of the
	// latency when the buffer size is left to them, so blocks of half the latency hold
	// a callback (bigger ones are split), and Queue / (latency/4) blocks hold Queue of
	// audio. The callback cannot allocate, so the pool is made here, once.
	period := cfg.Latency / 4
	blockFrames := max(cfg.FramesPerBuffer, int(audio.DurationToSamples(cfg.Latency/2, c.rate)), 256)
	if cfg.FramesPerBuffer > 0 {
		period = audio.SamplesToDuration(int64(cfg.FramesPerBuffer), c.rate)
	}
	n := 8
	if period > 0 {
		n = min(max(n, int(cfg.Queue/period)+1), 1024)
	}
	c.free = make(chan *block, n)
	for range n {
		c.free <- &block{gen: c.gen, samples: make([]float32, blockFrames*c.channels)}
	}
	post := r.p.TryPost
	dropped := &r.m.dropped
	scfg.OnFinished = func() { post(lost{gen: c.gen}) }
	began, rate := r.began, c.rate
	stream, err := host.OpenInput(scfg, func(in []float32, frames int, t portaudio.Timing, flags portaudio.Flags) {
		// When the buffer's first frame was captured, on the module's clock: PortAudio
		// says how long before the callback; a host that does not is taken to call back
		// as soon as the buffer is full.
		behind := t.Current - t.InputADC
		if t.InputADC == 0 || behind < 0 {
			behind = time.Duration(int64(frames) * int64(time.Second) / int64(rate))
		}
		c.deliver(in, frames, flags, time.Since(began)-behind, post, dropped)
	})
	if err != nil {
		host.Close()
		return fmt.Errorf("mic: %w", err)
	}
	c.stream = stream
	conv, err := newConverter(c.rate, cfg.Quality)
	if err != nil {
		host.Close()
		return fmt.Errorf("mic: %w", err)
	}
	r.cap, r.conv = c, conv
	r.delivering = false
	if err := stream.Start(); err != nil {
		r.closeCapture()
		return fmt.Errorf("mic: %w", err)
	}
	opened := Opened{Device: dev.Name, HostAPI: dev.HostAPI, Rate: c.rate, Channels: c.channels, Latency: stream.Info().InputLatency}
	if dev.ServerDevice != nil {
		opened.ServerSource = dev.ServerDevice.Name
	}
	r.log.Info("microphone open",
		zap.String("device", opened.Device), zap.String("host_api", opened.HostAPI), zap.String("sound_server_source", opened.ServerSource),
		zap.Int("rate", opened.Rate), zap.Int("channels", opened.Channels),
		zap.Duration("input_latency", opened.Latency))
	if cfg.OnOpen != nil {
		cfg.OnOpen(opened)
	}
	return nil
}

// deliver runs on PortAudio's thread: it copies the buffer into free blocks and posts
// them, dropping (and counting) what finds no block or no room in the module's queue.
// It never blocks and never allocates.
func (c *capture) deliver(in []float32, frames int, flags portaudio.Flags, captured time.Duration, post func(any) bool, dropped *atomic.Int64) {
	pos := c.pos
	c.pos += int64(frames)
	ch := c.channels
	for off := 0; off < frames; {
		var b *block
		select {
		case b = <-c.free:
		default:
		}
		blockFrames := frames - off
		if b != nil {
			blockFrames = min(blockFrames, len(b.samples)/ch)
		}
		if b == nil {
			dropped.Add(int64(blockFrames))
			off += blockFrames
			continue
		}
		if in == nil {
			clear(b.samples[:blockFrames*ch]) // PortAudio had no input: silence
		} else {
			copy(b.samples, in[off*ch:(off+blockFrames)*ch])
		}
		b.frames, b.pos, b.flags = blockFrames, pos+int64(off), flags
		b.captured = captured + time.Duration(int64(off)*int64(time.Second)/int64(c.rate))
		if !post(b) {
			dropped.Add(int64(blockFrames))
			c.free <- b // it came from free, so there is room
		}
		off += blockFrames
	}
}

func (r *runner) closeCapture() {
	c := r.cap
	if c == nil {
		return
	}
	r.cap = nil
	logClose := func(what string, err error) {
		switch {
		case errors.Is(err, portaudio.ErrStuck):
			r.log.Warn(what+": left behind", zap.Error(err))
		case err != nil:
			r.log.Debug(what, zap.Error(err))
		}
	}
	if c.stream != nil {
		logClose("closing the input stream", c.stream.Close())
	}
	logClose("closing PortAudio", c.host.Close())
}

func (r *runner) loop(ctx context.Context) error {
	r.lastBlock = r.p.Now()
	for {
		var deadline time.Time
		if !r.lostAt.IsZero() {
			deadline = r.silenceNext
			if r.reopenAt.Before(deadline) {
				deadline = r.reopenAt
			}
		} else {
			// A watchdog: the stream's end is normally announced by its finished
			// callback, but that post is dropped when the queue is full, and a device
			// can also stall without ending. A device that was just opened gets longer
			// to start (Config.StartupGrace).
			wait := watchdog
			if !r.delivering {
				wait = r.m.cfg.StartupGrace
			}
			deadline = r.lastBlock.Add(wait)
			if r.checkedAt.After(r.lastBlock) {
				deadline = r.checkedAt.Add(wait) // check again after another period
			}
		}
		ev, err := r.p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventLocal:
			switch v := ev.Local.(type) {
			case *block:
				if err := r.handleBlock(ctx, v); err != nil {
					return err
				}
			case lost:
				if err := r.handleLost(ctx, v); err != nil {
					return err
				}
			}
		case iu.EventDeadline:
			if r.lostAt.IsZero() {
				if err := r.checkStalled(ctx); err != nil {
					return err
				}
				continue
			}
			if err := r.whileLost(ctx); err != nil {
				return err
			}
		case iu.EventInputDone:
			// The network is stopping (the mic has no producers): deliver what was
			// captured and end.
			r.closeCapture()
			return r.drain(ctx)
		}
		r.logDrops()
	}
}

// watchdog is how long the module waits for captured audio before it checks the stream.
const watchdog = time.Second

// stallIsLoss is how long a capture that delivered audio may go without any before the
// device counts as lost. A stream can stall for good without ending: when the sound
// server dies under a capture stream, libpulse can deadlock ALSA's pulse plugin (see
// engines/portaudio's TestServerDeath), and a frozen server delivers nothing either. The
// stall must also have been seen by two watchdog checks, so that a machine waking from
// sleep, whose first check may come before its first audio, does not count.
const stallIsLoss = 4 * time.Second

// checkStalled runs when no audio arrived for the watchdog period.
func (r *runner) checkStalled(ctx context.Context) error {
	now := r.p.Now()
	c := r.cap
	if c != nil {
		select {
		case <-c.stream.Finished():
			return r.handleLost(ctx, lost{gen: c.gen})
		default:
		}
		if r.delivering && r.stallLogged && now.Sub(r.lastBlock) >= stallIsLoss {
			return r.lose(ctx, fmt.Errorf("device: no audio from %q for %v: %w",
				c.stream.Device().Name, now.Sub(r.lastBlock).Round(time.Millisecond), portaudio.ErrStreamFailed))
		}
	}
	if !r.stallLogged {
		if r.delivering {
			r.log.Warn("no audio from the input device", zap.Duration("for", now.Sub(r.lastBlock)))
		} else {
			r.log.Warn("no audio from the input device since it opened", zap.Duration("for", now.Sub(r.lastBlock)))
		}
		r.stallLogged = true
	}
	r.checkedAt = now
	return nil
}

func (r *runner) handleBlock(ctx context.Context, b *block) error {
	c := r.cap
	if c == nil || b.gen != c.gen {
		return nil // a block from a capture that is closed: its device is gone
	}
	r.lastBlock = r.p.Now()
	r.delivering = true
	if r.stallLogged {
		r.log.Info("input device delivers audio again")
		r.stallLogged = false
	}
	if b.flags&portaudio.InputOverflow != 0 {
		r.overflows++
		r.log.Debug("input overflow reported by the device", zap.Int("overflows", r.overflows))
	}
	if r.conv.gap(b.pos) {
		// Audio was dropped before this block: finish the stream before the gap, send
		// the partial frame, and continue at the position the new audio really has.
		if err := r.emit(ctx, r.conv.flush()); err != nil {
			return err
		}
		if err := r.flushFrame(ctx); err != nil {
			return err
		}
	}
	if !r.conv.started {
		r.next = r.conv.begin(b.pos)
	}
	r.clock.add(b.captured, r.conv.position(b.pos))
	out := r.conv.process(r.conv.mono(b.samples[:b.frames*c.channels], c.channels))
	c.free <- b // process copied the samples: the callback may reuse the block
	return r.emit(ctx, out)
}

// emit appends pipeline samples at r.next and sends every completed frame.
func (r *runner) emit(ctx context.Context, samples []float32) error {
	for len(samples) > 0 {
		if len(r.frame) == 0 {
			r.start = r.next
		}
		n := min(len(samples), r.frameLen-len(r.frame))
		r.frame = append(r.frame, samples[:n]...)
		samples = samples[n:]
		r.next += int64(n)
		if len(r.frame) == r.frameLen {
			if err := r.flushFrame(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushFrame sends the frame being filled, however long it is.
func (r *runner) flushFrame(ctx context.Context) error {
	if len(r.frame) == 0 {
		return nil
	}
	f := audio.Frame{Samples: r.frame, Rate: audio.PipelineRate, Channels: 1, Start: r.start}
	if epoch, ok := r.clock.epoch(); ok {
		f.Captured = r.began.Add(epoch + audio.SamplesToDuration(r.start, audio.PipelineRate))
	}
	r.frame = make([]float32, 0, r.frameLen) // the sent slice belongs to the IU now
	u := r.p.NewIU(f)
	return r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

// drain sends what the resampler holds back and the last partial frame.
func (r *runner) drain(ctx context.Context) error {
	if r.conv != nil {
		if err := r.emit(ctx, r.conv.flush()); err != nil {
			return err
		}
	}
	return r.flushFrame(ctx)
}

func (r *runner) handleLost(ctx context.Context, l lost) error {
	c := r.cap
	if c == nil || l.gen != c.gen {
		return nil
	}
	cause := c.stream.Err()
	if cause == nil {
		return nil // stopped on purpose
	}
	return r.lose(ctx, cause)
}

// lose ends the current capture, whose device failed for cause: it stops the network,
// or, with ContinueOnDeviceLoss, starts the silence and the reopening.
func (r *runner) lose(ctx context.Context, cause error) error {
	// Blocks posted before the loss were delivered ahead of this event (the local
	// queue is FIFO), so everything captured is in the output once drained.
	if err := r.drain(ctx); err != nil {
		return err
	}
	r.closeCapture()
	if !r.m.cfg.ContinueOnDeviceLoss {
		return fmt.Errorf("mic: input device lost after %s of audio: %w", audio.SamplesToDuration(r.next, audio.PipelineRate), cause)
	}
	now := r.p.Now()
	r.log.Error("input device lost; emitting silence and trying to reopen it",
		zap.Error(cause), zap.Duration("reopen_interval", r.m.cfg.ReopenInterval))
	r.lostAt = now
	// The silence starts where the audio stopped, so that the stream keeps the clock's
	// time also when the loss took seconds to notice (a stall, a close left behind).
	r.silenceNext = r.lastBlock.Add(r.m.cfg.FrameDuration)
	r.reopenAt = now.Add(r.m.cfg.ReopenInterval)
	return nil
}

// whileLost emits the silence due by now and tries to reopen the device when it is time.
func (r *runner) whileLost(ctx context.Context) error {
	if r.lostAt.IsZero() {
		return nil
	}
	now := r.p.Now()
	for !r.silenceNext.After(now) {
		if err := r.emit(ctx, make([]float32, r.frameLen)); err != nil {
			return err
		}
		r.silenceNext = r.silenceNext.Add(r.m.cfg.FrameDuration)
	}
	if now.Before(r.reopenAt) {
		return nil
	}
	r.reopenAt = now.Add(r.m.cfg.ReopenInterval)
	next := r.next
	if err := r.openCapture(); err != nil {
		r.log.Debug("input device still unavailable", zap.Error(err))
		return nil
	}
	// The new capture's device frame 0 is now, where the silence ends.
	r.conv.base = next
	r.lastBlock = now
	r.log.Info("input device reopened", zap.Duration("silence", now.Sub(r.lostAt)))
	r.lostAt = time.Time{}
	return nil
}

func (r *runner) logDrops() {
	d := r.m.dropped.Load()
	if d == r.loggedDrops {
		return
	}
	now := r.p.Now()
	if now.Sub(r.lastDropLog) < time.Second {
		return
	}
	rate := 0
	if r.cap != nil {
		rate = r.cap.rate
	}
	r.log.Warn("microphone audio dropped: the pipeline fell behind",
		zap.Int64("frames", d-r.loggedDrops), zap.Int64("total_frames", d), zap.Int("device_rate", rate))
	r.loggedDrops, r.lastDropLog = d, now
}
