package aec

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// Config configures the echo-cancelling module.
type Config struct {
	// Delay is the delay hint (Canceller.SetDelay): how long after the listener hears a
	// sample its echo reaches the microphone's samples, beyond what the output's and
	// the input's own timing account for — the acoustic path, a few milliseconds on a
	// laptop, or a simulated laptop's whole echo delay in replays. The engines find the
	// true delay themselves (AEC3 within 500 ms); the hint only speeds them up.
	Delay time.Duration `yaml:"delay" json:"delay"`
	// MaxWait is how long a microphone frame waits for the played audio that covers it
	// (1 s). The played audio is normally there first (the output plays it its latency
	// after the speaker reports it); it comes late only when the speaker's goroutine is
	// starved, and then the echo canceller had better wait than let the echo through.
	// Past it the frame is processed with silence for the part of the reference still
	// unknown, and played audio that arrives later for it is dropped. On a virtual clock
	// the speaker's played audio arrives without delay.
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
	// StatsInterval is how much audio lies between two Status IUs (1 s); negative for
	// none.
	StatsInterval time.Duration `yaml:"stats_interval" json:"stats_interval"`
}

func (c Config) withDefaults() Config {
	if c.MaxWait == 0 {
		c.MaxWait = time.Second
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = time.Second
	}
	return c
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if c.Delay < 0 || c.MaxWait < 0 {
		return fmt.Errorf("aec: negative delay %v or max wait %v", c.Delay, c.MaxWait)
	}
	return nil
}

// Module is the echo-cancelling network module. It consumes the microphone's audio
// (audio.Frame IUs, 16 kHz mono, and the audio.EndOfStream that ends a recording) and
// the speaker's played audio (any payload implementing Played), and emits the
// microphone's audio with the echo of the played audio removed: audio.Frame IUs on the
// microphone's own timeline, ADD+COMMIT, each grounded in the input frame it came from.
// With a LinearCanceller, a Linear IU with the canceller's linear output for the same
// stretch comes before each. The end of the stream is passed on after the last frame.
//
// Alignment. The order of Render and Capture calls is the canceller's clock, so the
// module puts the played audio on the microphone's timeline: a played sample heard at
// time T is rendered just before the capture frame that holds the microphone's sample
// captured at T (Frame.Captured for a microphone; for a recording, its sample s was
// spoken s/16000 s after the module started, which on a virtual clock is exact). Its echo
// arrives after that (Config.Delay later, as the hint says), in that frame or a later
// one. The played stream is placed when it first holds sound (10 ms early, so that a
// timing a little off never puts the reference after its echo) and then followed sample
// by sample; it moves when the output's timing clearly moved (its latency grew or
// shrank, and the echo with it), not for the timing's jitter nor for the microphone's
// clock estimate settling (see place). A microphone frame waits for the played audio up
// to its end (Config.MaxWait at most).
//
// Latency. The canceller's output lags its input by Canceller.Latency (18 ms for AEC3,
// 28 ms with the pipeline's TailGate around it): the module emits each frame's output
// on the timeline where it belongs (Start shifted back by the latency), so the first
// frame is that much shorter and the stream is completed at its end with the last
// samples. Downstream, the audio arrives that much later on the clock; its stream
// positions are the microphone's.
type Module struct {
	name string
	cfg  Config
	c    Canceller

	audio      atomic.Int64 // samples captured
	processing atomic.Int64 // nanoseconds in the canceller
}

// New returns the module around c, which the caller keeps and closes after the network
// ran.
func New(name string, cfg Config, c Canceller) (*Module, error) {
	if c == nil {
		return nil, errors.New("aec: no canceller")
	}
	if name == "" {
		name = "aec"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Module{name: name, cfg: cfg.withDefaults(), c: c}, nil
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Cost returns what cancelling has cost so far. It is safe to call while the module
// runs (for benchmarks that report the canceller's share of the CPU).
func (m *Module) Cost() Cost {
	return Cost{
		Audio:      audio.SamplesToDuration(m.audio.Load(), Rate),
		Processing: time.Duration(m.processing.Load()),
	}
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	m.c.SetDelay(m.cfg.Delay + earlyBy)
	lat := int64(latencySamples(m.c))
	r := &runner{m: m, p: p, log: p.Logger(), start: p.Now(), lat: lat, skip: lat, next: -1}
	r.nextStats = audio.DurationToSamples(m.cfg.StatsInterval, Rate)
	err := r.loop(ctx)
	c := m.Cost()
	r.log.Info("echo canceller finished",
		zap.Duration("audio", c.Audio), zap.Duration("processing", c.Processing), zap.Float64("rtf", c.RTF()),
		zap.Duration("unreferenced", audio.SamplesToDuration(r.unreferenced, Rate)),
		zap.Duration("late_reference", audio.SamplesToDuration(r.late, Rate)),
		zap.Int("moves", r.moves), zap.Int("left_to_engine", r.left))
	return err
}

// Placing the played stream (see place): the microphone's clock is an average over the
// last averaging frames; the stream is placed earlyBy ahead of the timing, and moved when
// moveAgree played IUs in a row put it at least moveMin elsewhere (and agree within
// moveMin/2), or at once when the microphone's clock moved epochMoveMin against the
// output's.
const (
	averaging = 32
	earlyBy   = 10 * time.Millisecond
	moveMin   = 5 * time.Millisecond
	moveAgree = 3
	// epochMoveMin is how far the microphone's clock must move, against the output's,
	// for the stream to follow at once.
	epochMoveMin = 2 * earlyBy
	// maxDrift is the fastest a device's clock drifts against the system's (a poor one
	// is 100 ppm off): the microphone's epoch moving earlier faster than this is its
	// estimate settling, which moves it by tens of milliseconds over seconds.
	maxDrift = 2000e-6
	// maxKept is the longest delay from the reference to its echo that a move is left
	// to the engine for (engineKeepsUp): within AEC3's delay estimator's reach and
	// speex's 200 ms filter past its hint.
	maxKept = 200 * time.Millisecond
	// maxStash bounds the played audio kept before the first microphone frame says
	// where the microphone's timeline lies.
	maxStash = 5 * time.Second
)

type pending struct {
	id      iu.ID
	f       audio.Frame
	arrived time.Time
	// restart: a new stream starts at f.Start (a restarted capture); f holds no audio.
	restart bool
}

// runner is the state of one Run, owned by the module's goroutine. Positions are
// samples on the microphone's timeline.
type runner struct {
	m     *Module
	p     *iu.Ports
	log   *zap.Logger
	start time.Time
	lat   int64 // the canceller's latency in samples

	queue []pending
	next  int64   // position of the next input sample expected; -1 before the first
	skip  int64   // output samples still to drop (they belong before the stream's start)
	last  pending // the last frame cancelled

	// The microphone's clock: position 0 was captured at epoch, an average over its
	// frames' capture times (or the module's start for a recording).
	epoch    time.Time
	epochN   int
	anchored bool
	// seenEpoch is the epoch at the last played IU's timing, when the microphone was at
	// position seenAt: how fast the epoch moves.
	seenEpoch time.Time
	seenAt    int64

	// The reference: ref holds the played audio for positions [rendered, rendered+len(ref)),
	// where rendered is how far Render has been fed.
	ref      []float32
	rendered int64
	// offset puts the played stream on the timeline: played sample j is at offset + j.
	offset int64
	locked bool  // the reference has held sound: the stream moves only on a clear change
	moveTo int64 // where the last IUs would move it, and how many agreed
	agreed int
	// placedOut and placedEpoch are the output's timing (when played sample 0 is heard)
	// and the microphone's epoch the offset was last set from: the stream moves by how
	// far they moved apart since (see place).
	placedOut   time.Time
	placedEpoch time.Time
	// tracking counts the microphone frames after a move with its clock during which the
	// stream follows the clock's smaller moves too: the average the clock is lags a
	// real jump by up to averaging frames, and the move came half way. leaving: the
	// move is left to the engine (engineKeepsUp), leftBy so far.
	tracking int
	leaving  bool
	leftBy   int64
	stash    []audio.Frame
	stashT   []time.Time

	eos      *iu.IU // the end of the stream, passed on once the queue is empty
	flushed  bool
	finished bool

	nextStats    int64 // stream position of the next status
	unreferenced int64
	late         int64
	moves        int
	left         int
	failures     int
}

func (r *runner) loop(ctx context.Context) error {
	for {
		var deadline time.Time
		if len(r.queue) > 0 {
			deadline = r.queue[0].arrived.Add(r.m.cfg.MaxWait)
		}
		ev, err := r.p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if err := r.update(up); err != nil {
					return err
				}
			}
		case iu.EventInputDone:
			// Nothing more comes: what waits is processed with what is known.
			if err := r.process(ctx, true); err != nil {
				return err
			}
			return r.flush(ctx)
		}
		if err := r.process(ctx, false); err != nil {
			return err
		}
	}
}

func (r *runner) update(up iu.Update) error {
	if up.Type != iu.Add {
		return nil // everything arrives as ADD+COMMIT
	}
	switch pl := up.IU.Payload.(type) {
	case audio.Frame:
		return r.frame(up.IU.ID, pl)
	case audio.EndOfStream:
		u := up.IU
		r.eos = &u
	case Played:
		f, heard := pl.PlayedAudio()
		r.played(f, heard)
	}
	return nil
}

// frame queues a microphone frame, bridging a short gap in the stream with silence.
func (r *runner) frame(id iu.ID, f audio.Frame) error {
	if r.finished {
		return fmt.Errorf("aec: audio %s after the end of the stream", f.Summary())
	}
	if f.Rate != Rate || f.Channels != 1 {
		return fmt.Errorf("aec: audio %s: want %d Hz mono", f.Summary(), Rate)
	}
	if r.next < 0 {
		r.next, r.rendered = f.Start, f.Start
	}
	switch gap := f.Start - r.next; {
	case gap > audio.MaxGap:
		// A new stream (a restarted capture): it starts over once the queue is done,
		// on a clock of its own, where the played stream is placed afresh.
		r.queue = append(r.queue, pending{f: audio.Frame{Start: f.Start}, arrived: r.p.Now(), restart: true})
		r.epochN, r.locked, r.agreed, r.tracking = 0, false, 0, 0
	case gap > 0:
		// Lost capture blocks: silence in their place keeps the canceller's clock.
		samples := make([]float32, gap, gap+int64(f.Len()))
		f.Samples, f.Start = append(samples, f.Samples...), r.next
		if !f.Captured.IsZero() {
			f.Captured = f.Captured.Add(-audio.SamplesToDuration(gap, Rate))
		}
	case gap < 0:
		if -gap >= int64(f.Len()) {
			return nil // audio already seen
		}
		f.Samples, f.Start = f.Samples[-gap:], r.next
		if !f.Captured.IsZero() {
			f.Captured = f.Captured.Add(audio.SamplesToDuration(-gap, Rate))
		}
	}
	r.next = f.End()
	if !f.Captured.IsZero() {
		e := f.Captured.Add(-audio.SamplesToDuration(f.Start, Rate))
		if r.epochN == 0 {
			r.epoch = e
		} else {
			r.epoch = r.epoch.Add(e.Sub(r.epoch) / time.Duration(min(r.epochN+1, averaging)))
		}
		r.epochN++
		r.tracking = max(r.tracking-1, 0)
	} else if !r.anchored {
		r.epoch = r.start
	}
	if !r.anchored {
		r.anchored = true
		for i, s := range r.stash {
			r.played(s, r.stashT[i])
		}
		r.stash, r.stashT = nil, nil
	}
	r.queue = append(r.queue, pending{id: id, f: f, arrived: r.p.Now()})
	return nil
}

// process runs the queued frames whose reference is complete (or that waited long
// enough, or all with force), and passes the end of the stream on after the last.
func (r *runner) process(ctx context.Context, force bool) error {
	now := r.p.Now()
	for len(r.queue) > 0 {
		q := r.queue[0]
		if q.restart {
			if err := r.flush(ctx); err != nil {
				return err
			}
			r.rendered, r.ref, r.skip, r.flushed = q.f.Start, nil, r.lat, false
			r.queue = r.queue[1:]
			continue
		}
		known := r.rendered + int64(len(r.ref))
		if known < q.f.End() && !force && now.Before(q.arrived.Add(r.m.cfg.MaxWait)) {
			break
		}
		if err := r.cancel(ctx, q.id, q.f); err != nil {
			return err
		}
		r.queue = r.queue[1:]
	}
	if r.eos != nil && len(r.queue) == 0 {
		if err := r.flush(ctx); err != nil {
			return err
		}
		u := r.p.NewIU(r.eos.Payload, r.eos.ID)
		r.eos, r.finished = nil, true
		if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
			return fmt.Errorf("aec: %w", err)
		}
	}
	return nil
}

// cancel renders the reference up to the frame's end, captures the frame and emits the
// output.
func (r *runner) cancel(ctx context.Context, id iu.ID, f audio.Frame) error {
	out, linear, err := r.run(f.End(), f.Samples)
	if err != nil {
		return err
	}
	r.last = pending{id: id, f: f}
	// The output is the input lat samples earlier: positions [Start-lat, End-lat).
	start := f.Start - r.lat
	if r.skip > 0 {
		k := min(r.skip, int64(len(out)))
		out, start, r.skip = out[k:], start+k, r.skip-k
		if linear != nil {
			linear = linear[k:]
		}
	}
	if len(out) == 0 {
		return nil
	}
	g := audio.Frame{Samples: out, Rate: Rate, Channels: 1, Start: start}
	if !f.Captured.IsZero() {
		g.Captured = f.Captured.Add(-audio.SamplesToDuration(f.Start-start, Rate))
	}
	r.flushed = false
	if err := r.emit(ctx, g, linear, id); err != nil {
		return err
	}
	return r.status(ctx, g.End())
}

// run feeds the canceller: the reference up to position end, then the capture samples.
// It returns the cleaned samples and, from a LinearCanceller, the linear output (else
// nil).
func (r *runner) run(end int64, capture []float32) (out, linear []float32, err error) {
	n := end - r.rendered
	far := make([]float32, n)
	k := copy(far, r.ref)
	r.ref = r.ref[k:]
	if int64(k) < n {
		r.unreferenced += n - int64(k)
	}
	r.rendered = end
	began := time.Now()
	rerr := r.m.c.Render(far)
	var cerr error
	if lc, ok := r.m.c.(LinearCanceller); ok {
		out, linear, cerr = lc.CaptureLinear(capture)
	} else {
		out, cerr = r.m.c.Capture(capture)
	}
	r.m.processing.Add(int64(time.Since(began)))
	r.m.audio.Add(int64(len(capture)))
	if err := errors.Join(rerr, cerr); err != nil {
		if out == nil {
			return nil, nil, err // a closed canceller
		}
		// One bad frame passes unprocessed; the stream goes on.
		if r.failures++; r.failures == 1 || r.failures%100 == 0 {
			r.log.Warn("echo canceller failed on a frame", zap.Error(err), zap.Int("failures", r.failures))
		}
	}
	return out, linear, nil
}

// flush completes the stream: the canceller's last lat samples of output, pushed out
// with silence. The silence's own output is dropped by the next stream (skip).
func (r *runner) flush(ctx context.Context) error {
	if r.flushed || r.next < 0 {
		r.flushed = true
		return nil
	}
	r.flushed = true
	end := r.rendered
	out, linear, err := r.run(end+r.lat, make([]float32, r.lat))
	if err != nil {
		return err
	}
	start := end - r.lat
	k := min(r.skip, int64(len(out)))
	out, start = out[k:], start+k
	if linear != nil {
		linear = linear[k:]
	}
	r.skip = r.lat
	if len(out) == 0 {
		return nil
	}
	g := audio.Frame{Samples: out, Rate: Rate, Channels: 1, Start: start}
	if f := r.last.f; !f.Captured.IsZero() {
		g.Captured = f.Captured.Add(audio.SamplesToDuration(start-f.Start, Rate))
	}
	return r.emit(ctx, g, linear, r.last.id)
}

// emit sends the cleaned audio f, after the linear output for the same stretch when
// there is one.
func (r *runner) emit(ctx context.Context, f audio.Frame, linear []float32, from iu.ID) error {
	var grounds []iu.ID
	if from != "" {
		grounds = []iu.ID{from}
	}
	var ups []iu.Update
	if linear != nil {
		l := f
		l.Samples = linear
		u := r.p.NewIU(Linear{Audio: l}, grounds...)
		ups = append(ups, iu.AddOf(u), iu.CommitOf(u))
	}
	u := r.p.NewIU(f, grounds...)
	ups = append(ups, iu.AddOf(u), iu.CommitOf(u))
	if err := r.p.Send(ctx, ups...); err != nil {
		return fmt.Errorf("aec: %w", err)
	}
	return nil
}

// status sends a Status IU when the stream has passed the next status position.
func (r *runner) status(ctx context.Context, pos int64) error {
	if r.m.cfg.StatsInterval < 0 || pos < r.nextStats {
		return nil
	}
	step := audio.DurationToSamples(r.m.cfg.StatsInterval, Rate)
	r.nextStats = (pos/step + 1) * step
	s := Status{
		Pos: audio.SamplesToDuration(pos, Rate), Stats: r.m.c.Stats(), Cost: r.m.Cost(),
		Unreferenced: audio.SamplesToDuration(r.unreferenced, Rate),
	}
	u := r.p.NewIU(s)
	if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
		return fmt.Errorf("aec: %w", err)
	}
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
