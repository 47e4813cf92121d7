package source

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// Played is what the echo simulator needs from the speaker's played-audio IUs
// (speaker.Played): the audio the output played (16 kHz mono; Start counts the played
// stream's samples) and when the listener heard its first sample.
type Played interface {
	PlayedAudio() (f audio.Frame, heard time.Time)
}

// Echo is a network module that turns a replay into a laptop: it adds to the recorded
// audio passing through it the echo of the agent's own voice, as a laptop's microphone
// picks up its speakers. It consumes the source's audio.Frame IUs (and its
// audio.EndOfStream) and the speaker's played audio (Played), sends each frame on with
// the echo mixed in (same Start, ADD+COMMIT, grounded in the source's frame), and passes
// the end of the stream on after the last frame.
//
// The echo path is audio/room's: played audio heard at time T reaches the recording's
// timeline at T + Delay (the recording's sample s is spoken s/16000 s after the module
// started, as a source paces it), through the gain, the room's reverberation and a noise
// floor (room.Config; its Delay is applied here, the rest by room.Path). The simulation
// is causal: a frame ending at s needs the played audio heard up to s − Delay, which the
// speaker has reported by the time the frame is due (it reports what it played every
// step, ahead of the listener by its output latency); a frame waits for it through Next
// — so the result depends only on the audio, never on the order in which the two
// streams arrive, and replays stay deterministic on the virtual clock.
type Echo struct {
	name string
	cfg  room.Config
}

// echoMaxWait bounds how long a frame waits for the played audio (the speaker reports
// every 10 ms): past it the frame goes on with silence for the echo it misses.
const echoMaxWait = time.Second

// NewEcho returns the echo simulator for the path cfg (its Rate must be 0 or 16000).
func NewEcho(name string, cfg room.Config) (*Echo, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if cfg.Rate != 0 && cfg.Rate != audio.PipelineRate {
		return nil, fmt.Errorf("source: echo path at %d Hz: the pipeline runs at %d", cfg.Rate, audio.PipelineRate)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	return &Echo{name: name, cfg: cfg}, nil
}

// Name implements iu.Module.
func (e *Echo) Name() string { return e.name }

// Run implements iu.Module.
func (e *Echo) Run(ctx context.Context, p *iu.Ports) error {
	cfg := e.cfg
	cfg.Delay = 0
	path, err := room.New(cfg)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	delay := audio.DurationToSamples(e.cfg.Delay, audio.PipelineRate)
	r := &echoRunner{p: p, log: p.Logger(), start: p.Now(), path: path, delay: delay, next: -1, from: -delay}
	for {
		var deadline time.Time
		if len(r.queue) > 0 {
			deadline = r.queue[0].arrived.Add(echoMaxWait)
		}
		ev, err := p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		force := false
		switch ev.Kind {
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if err := r.update(up); err != nil {
					return err
				}
			}
		case iu.EventInputDone:
			force = true
		}
		if err := r.process(ctx, force); err != nil {
			return err
		}
		if force {
			return nil
		}
	}
}

type echoFrame struct {
	id      iu.ID
	f       audio.Frame
	arrived time.Time
}

// echoRunner is the state of one Run. Positions are samples on the recording's timeline.
type echoRunner struct {
	p     *iu.Ports
	log   *zap.Logger
	start time.Time
	path  *room.Path
	delay int64

	queue []echoFrame
	next  int64 // the position the next frame should start at; -1 before the first
	eos   *iu.IU
	done  bool

	// played holds the played audio heard at positions [from, from+len(played)).
	played []float32
	from   int64
	missed int64 // echo samples mixed without their played audio (it came too late)
}

func (r *echoRunner) update(up iu.Update) error {
	if up.Type != iu.Add {
		return nil
	}
	switch pl := up.IU.Payload.(type) {
	case audio.Frame:
		if r.done {
			return fmt.Errorf("source: echo: audio %s after the end of the stream", pl.Summary())
		}
		if pl.Rate != audio.PipelineRate || pl.Channels != 1 {
			return fmt.Errorf("source: echo: audio %s: want %d Hz mono", pl.Summary(), audio.PipelineRate)
		}
		if r.next >= 0 && pl.Start != r.next {
			return fmt.Errorf("source: echo: audio %s does not continue the stream at %d", pl.Summary(), r.next)
		}
		if r.next < 0 {
			r.begin(pl.Start)
		}
		r.next = pl.End()
		r.queue = append(r.queue, echoFrame{id: up.IU.ID, f: pl, arrived: r.p.Now()})
	case audio.EndOfStream:
		u := up.IU
		r.eos = &u
	case Played:
		f, heard := pl.PlayedAudio()
		r.add(f, heard)
	}
	return nil
}

// begin starts the stream at position s (0 for a source): its first frame hears the
// played audio from s-delay on.
func (r *echoRunner) begin(s int64) {
	if d := s - r.delay - r.from; d > 0 {
		r.played = r.played[min(d, int64(len(r.played))):]
	} else if d < 0 {
		r.played = append(make([]float32, -d), r.played...)
	}
	r.from = s - r.delay
}

// add puts played audio at the position where it was heard.
func (r *echoRunner) add(f audio.Frame, heard time.Time) {
	if f.Rate != audio.PipelineRate || f.Channels != 1 {
		return
	}
	pos := audio.DurationToSamples(heard.Sub(r.start), audio.PipelineRate)
	samples := f.Samples
	if pos < r.from {
		cut := min(r.from-pos, int64(len(samples)))
		pos, samples = pos+cut, samples[cut:]
	}
	end := r.from + int64(len(r.played))
	if pos < end {
		r.played = r.played[:pos-r.from]
	} else if pos > end {
		r.played = append(r.played, make([]float32, pos-end)...)
	}
	r.played = append(r.played, samples...)
}

// process mixes the echo into the frames whose played audio is known (all, with force)
// and passes the end of the stream on after the last.
func (r *echoRunner) process(ctx context.Context, force bool) error {
	now := r.p.Now()
	for len(r.queue) > 0 {
		q := r.queue[0]
		need := q.f.End() - r.delay // the echo up to the frame's end comes from here
		known := r.from + int64(len(r.played))
		if known < need && !force && now.Before(q.arrived.Add(echoMaxWait)) {
			break
		}
		r.queue = r.queue[1:]
		if err := r.mix(ctx, q); err != nil {
			return err
		}
	}
	if r.eos != nil && len(r.queue) == 0 {
		u := r.p.NewIU(r.eos.Payload, r.eos.ID)
		r.eos, r.done = nil, true
		if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
			return fmt.Errorf("source: echo: %w", err)
		}
	}
	if force && r.missed > 0 {
		r.log.Warn("echo simulated without the played audio for part of the stream",
			zap.Duration("missed", audio.SamplesToDuration(r.missed, audio.PipelineRate)))
	}
	return nil
}

// mix adds the echo of the played audio heard delay earlier to the frame and sends it.
func (r *echoRunner) mix(ctx context.Context, q echoFrame) error {
	n := int64(q.f.Len())
	heard := make([]float32, n)
	// The frame [s, e) hears the played audio at [s-delay, e-delay), which starts at
	// r.from (the played buffer is consumed as frames go by).
	k := copy(heard, r.played)
	r.missed += n - int64(k)
	if int64(len(r.played)) > n {
		r.played = r.played[n:]
	} else {
		r.played = r.played[:0]
	}
	r.from += n
	out := append([]float32(nil), q.f.Samples...)
	if err := r.path.AddTo(out, heard); err != nil {
		return fmt.Errorf("source: echo: %w", err)
	}
	f := q.f
	f.Samples = out
	u := r.p.NewIU(f, q.id)
	if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
		return fmt.Errorf("source: echo: %w", err)
	}
	return nil
}
