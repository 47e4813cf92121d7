package speaker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// Options are the settings both outputs share.
type Options struct {
	// ProgressInterval is how often a progress IU is sent while playing (20 ms).
	ProgressInterval time.Duration `yaml:"progress_interval" json:"progress_interval"`
	// Step is how often the module wakes while audio is in flight, to keep the output
	// fed and to notice what was heard (10 ms).
	Step time.Duration `yaml:"step" json:"step"`
	// Lead is how much audio the module keeps resampled and handed to the output ahead
	// of what it plays (100 ms; at least twice the output latency on a device). A longer
	// lead rides out longer stalls of the module; it does not delay Pause or Interrupt,
	// which take effect at the output itself.
	Lead time.Duration `yaml:"lead" json:"lead"`
	// DuckRamp is how long a change of level (Duck, Unduck) takes: a linear ramp, short
	// enough to act within a device buffer or two, long enough not to click (10 ms).
	DuckRamp time.Duration `yaml:"duck_ramp" json:"duck_ramp"`
	// Quality is the resampler's quality.
	Quality audio.Quality `yaml:"-" json:"-"`
	// Played makes the module report everything its output plays, silence included,
	// as Played IUs (the echo canceller's reference). The module then wakes every Step
	// while idle too; its progress reports are the same with or without it.
	Played bool `yaml:"-" json:"-"`
}

// WithDefaults fills in the defaults of the fields left zero.
func (o Options) WithDefaults() Options {
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 20 * time.Millisecond
	}
	if o.Step <= 0 {
		o.Step = 10 * time.Millisecond
	}
	if o.Lead <= 0 {
		o.Lead = 100 * time.Millisecond
	}
	if o.DuckRamp <= 0 {
		o.DuckRamp = 10 * time.Millisecond
	}
	return o
}

func (o Options) validate() error {
	if o.Lead < o.Step {
		return fmt.Errorf("speaker: lead %v is shorter than the step %v", o.Lead, o.Step)
	}
	return nil
}

// Output is where the samples go: a sound device (package portaudio) or a WAV file on
// the network clock (NewFile). It plays what its Renderer reads from the Ring the module
// writes, and tells the module which device frame the listener hears when. The module
// calls every method on its own goroutine, one Output per Run.
type Output interface {
	// Open prepares the output and returns its sample rate. start is the module's start,
	// which output timelines count from.
	Open(ctx context.Context, p *iu.Ports, start time.Time) (rate int, err error)
	// Begin starts rendering from r (through NewRenderer(r)).
	Begin(r *Ring) error
	// Rate returns the sample rate Open returned.
	Rate() int
	// Advance lets an output that renders on the module's goroutine render up to now.
	Advance(now time.Time) error
	// Kick makes such an output apply a control request at once.
	Kick()
	// HeardFrame returns the device frame the listener hears at now.
	HeardFrame(now time.Time) int64
	// FrameTime returns when the listener hears device frame f.
	FrameTime(f int64) time.Time
	// Failed returns the error that ended the output, if it ended on its own.
	Failed() error
	// Close stops the output; with drain, after what it holds has been heard.
	Close(drain bool) error
}

// Speaker is the speaker module. Make one with NewFile, portaudio.New or New.
type Speaker struct {
	name      string
	opts      Options
	newOutput func() Output
	// underruns sums, over the runs that ended, the times the output ran dry while audio
	// was waiting (read by Underruns after the network ran).
	underruns atomic.Int64
}

// Underruns returns how many times the output ran dry while audio was waiting to be
// played (the module was late feeding it), over every Run that has ended.
func (s *Speaker) Underruns() int64 { return s.underruns.Load() }

// New returns a speaker module named name (default "speaker") that plays through the
// output newOutput makes for each Run.
func New(name string, opts Options, newOutput func() Output) (*Speaker, error) {
	if name == "" {
		name = "speaker"
	}
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Speaker{name: name, opts: opts, newOutput: newOutput}, nil
}

// Name implements iu.Module.
func (s *Speaker) Name() string { return s.name }

// Run implements iu.Module: it plays audio IUs, acts on control commands and sends
// progress IUs until its input ends and everything queued has been heard (or the
// output was paused when the input ended).
func (s *Speaker) Run(ctx context.Context, p *iu.Ports) error {
	log := p.Logger()
	start := p.Now()
	out := s.newOutput()
	rate, err := out.Open(ctx, p, start)
	if err != nil {
		return err
	}
	ring := newRing(ringCapacity(rate, s.opts.Lead, s.opts.Step))
	ring.setRamp(audio.DurationToSamples(s.opts.DuckRamp, rate))
	var tap *tapReader
	if s.opts.Played {
		ring.withTap(tapSeconds * rate)
		if tap, err = newTapReader(ring, out, s.opts.Quality); err != nil {
			out.Close(false)
			return err
		}
	}
	pl := newPlayer(ring, out, s.opts.Quality, s.opts.Lead, s.opts.Step, start, log)
	if err := out.Begin(ring); err != nil {
		out.Close(false)
		return err
	}
	r := &runner{s: s, p: p, out: out, pl: pl, tap: tap, start: start, log: log}
	err = r.loop(ctx)
	drain := err == nil
	if cerr := out.Close(drain); cerr != nil && err == nil {
		err = cerr
	}
	if pl.underruns > 0 {
		s.underruns.Add(int64(pl.underruns))
		log.Info("speaker finished", zap.Int("underruns", pl.underruns))
	}
	return err
}

type runner struct {
	s            *Speaker
	p            *iu.Ports
	out          Output
	pl           *player
	tap          *tapReader // nil unless Options.Played
	start        time.Time
	log          *zap.Logger
	nextProgress time.Time
	inputDone    bool
}

func (r *runner) loop(ctx context.Context) error {
	opts := r.s.opts
	r.nextProgress = r.start.Add(opts.ProgressInterval)
	for {
		now := r.p.Now()
		pl := r.pl
		if r.inputDone && r.finished() {
			if pl.paused {
				pl.emit(pl.reportAt(Stopped, pl.heard, pl.pos(now), false, "input ended while paused"))
			}
			if err := r.send(ctx); err != nil {
				return err
			}
			return r.sendPlayed(ctx, true)
		}
		var deadline time.Time
		// tapOnly: the module wakes only to pass on what the output played, while
		// nothing else can change, and so does nothing else (the progress reports stay
		// exactly what they are without the tap).
		tapOnly := false
		if pl.busy() {
			deadline = align(r.start, now, opts.Step)
			if pl.state == Playing && r.nextProgress.Before(deadline) {
				deadline = r.nextProgress
			}
			if !pl.tailUntil.IsZero() && pl.tailUntil.Before(deadline) {
				deadline = pl.tailUntil
			}
		} else if r.tap != nil {
			deadline, tapOnly = align(r.start, now, opts.Step), true
		}
		ev, err := r.p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		now = r.p.Now()
		if err := r.out.Advance(now); err != nil {
			return err
		}
		if err := r.out.Failed(); err != nil {
			pl.sync(now, false)
			pl.emit(pl.reportAt(Stopped, pl.heard, pl.pos(now), false, "output failed"))
			if serr := r.send(ctx); serr != nil {
				r.log.Warn("cannot send the final progress", zap.Error(serr))
			}
			if serr := r.sendPlayed(ctx, true); serr != nil {
				r.log.Warn("cannot send the last played audio", zap.Error(serr))
			}
			return fmt.Errorf("speaker: %w", err)
		}
		if tapOnly && ev.Kind == iu.EventDeadline {
			if err := r.sendPlayed(ctx, false); err != nil {
				return err
			}
			continue
		}
		steady := false
		if !now.Before(r.nextProgress) {
			steady = true
			r.nextProgress = align(r.start, now, opts.ProgressInterval)
		}
		pl.sync(now, steady)
		switch ev.Kind {
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				r.handle(up)
			}
		case iu.EventInputDone:
			r.inputDone = true
		}
		pl.sync(now, false)
		pl.fill()
		if err := r.send(ctx); err != nil {
			return err
		}
		if err := r.sendPlayed(ctx, false); err != nil {
			return err
		}
	}
}

// sendPlayed sends what the output played since the last call as Played IUs (with
// last, also what the tap's resampler holds back).
func (r *runner) sendPlayed(ctx context.Context, last bool) error {
	if r.tap == nil {
		return nil
	}
	played, err := r.tap.drain(last)
	for _, pl := range played {
		if pl.Lost > 0 {
			r.log.Warn("played audio lost: the speaker fell behind its output", zap.Int64("samples", pl.Lost))
		}
		u := r.p.NewIU(pl)
		if serr := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); serr != nil {
			return serr
		}
	}
	return err
}

// finished reports whether the module may end after its input ended: everything heard,
// or the output held by a pause that nobody will resume.
func (r *runner) finished() bool {
	pl := r.pl
	if pl.inflight != nil || len(pl.waiting) > 0 || !pl.tailUntil.IsZero() {
		return false
	}
	return pl.paused || !pl.busy()
}

func (r *runner) handle(up iu.Update) {
	switch pay := up.IU.Payload.(type) {
	case control.Command:
		if up.Type == iu.Add {
			r.pl.command(pay)
		}
	case Audio:
		switch up.Type {
		case iu.Add:
			r.pl.enqueue(up.IU, pay)
		case iu.UpdatePayload:
			r.pl.update(up.IU, pay)
		case iu.Commit:
			r.pl.release(up.IU.ID)
		case iu.Revoke:
			r.pl.revoke(up.IU.ID)
		}
	}
}

// send turns the player's queued reports into progress IUs.
func (r *runner) send(ctx context.Context) error {
	for _, pr := range r.pl.takeReports() {
		var u iu.IU
		if pr.Heard != "" {
			u = r.p.NewIU(pr, pr.Heard)
		} else {
			u = r.p.NewIU(pr)
		}
		if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
			if errors.Is(err, iu.ErrInvalidUpdate) {
				return fmt.Errorf("speaker: %w", err)
			}
			return err
		}
	}
	return nil
}

// align returns the first time after now on the grid start + k·step.
func align(start, now time.Time, step time.Duration) time.Time {
	k := now.Sub(start)/step + 1
	return start.Add(k * step)
}
