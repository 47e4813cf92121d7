package overlap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

// Recognizer decodes a short stretch of 16 kHz audio in one piece, independently of any
// earlier call (package sphinx opens pocketsphinx with the overlap vocabulary).
type Recognizer interface {
	FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error)
}

// Module is the overlap module. It consumes the user's audio (audio.Frame IUs, 16 kHz
// mono), the VAD's candidates and segments and the manager's interrupts (after one, the
// sound is not decoded any more), and produces Evidence IUs. When its
// audio comes from an echo canceller that also sends its linear filter's output
// (linearAudio IUs, sent before the audio.Frame of the same stretch), it decodes that
// instead: the canceller's suppressor takes the first 100–250 ms of a voice that starts
// over the agent's, and the linear output keeps them. It keeps a residue of the agent's
// voice too, so the sound's acoustics and its end are still judged on the cleaned
// audio, as the VAD hears it.
type Module struct {
	name string
	cfg  Config
	rec  Recognizer
}

// New returns an overlap module that decodes with rec; the caller keeps ownership of rec.
func New(name string, cfg Config, rec Recognizer) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errors.New("overlap: no recognizer")
	}
	return &Module{name: name, cfg: cfg, rec: rec}, nil
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// runner is the state of one Run, owned by the module's goroutine.
type runner struct {
	m   *Module
	p   *iu.Ports
	log *zap.Logger

	hop, first, preRoll, linearPreRoll, maxSound, endSilence int64

	// recent is the latest audio (enough for a pre-roll), from stream position recentAt,
	// and recentDecode what a decode of it takes: the linear output beside it, or the
	// audio itself where there is none.
	recent       []float32
	recentDecode []float32
	recentAt     int64
	pos          int64 // stream position after the last sample received

	cur  *sound
	jobs int
	// linear: the audio comes with the canceller's linear output (and the longer
	// pre-roll applies); nextLinear is the linear output for the audio.Frame that comes
	// next.
	linear     bool
	nextLinear audio.Frame
}

// linearAudio is an echo canceller's linear output (aec.Linear).
type linearAudio interface {
	LinearAudio() audio.Frame
}

// sound is the one sound being followed.
type sound struct {
	u       iu.IU
	ev      Evidence
	start   int64 // stream position where the sound began
	from    int64 // stream position of samples[0] (the pre-roll's start)
	samples []float32
	// decode is what is decoded beside samples: the linear output, or samples again.
	decode []float32
	an     *analyzer
	ac     acoustics
	// analysed is the stream position up to which frames were analysed.
	analysed int64
	// decodedTo is the end of the audio the last decode started covered; decoding is
	// the job running (0: none).
	decodedTo int64
	decoding  int
	// closed: the VAD ended the sound (its segment ended, or it withdrew the candidate);
	// the IU is committed once the last decode is in.
	closed bool
	// decided: the manager interrupted the agent meanwhile. Its barge-in is settled and
	// the agent falls silent, so decoding more of the sound would only cost a core (each
	// decode covers all of it); its acoustics are still followed to its end.
	decided bool
}

func (s *sound) end() int64 { return s.from + int64(len(s.samples)) }

type decoded struct {
	seq int
	to  int64
	hyp asr.Hypothesis
	err error
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	n := func(d time.Duration) int64 { return audio.DurationToSamples(d, audio.PipelineRate) }
	r := &runner{m: m, p: p, log: p.Logger(),
		hop: n(m.cfg.Hop), first: n(m.cfg.FirstDecode), preRoll: n(m.cfg.PreRoll), linearPreRoll: n(m.cfg.LinearPreRoll),
		maxSound: n(m.cfg.MaxSound), endSilence: n(m.cfg.EndSilence)}
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if err := r.update(ctx, up); err != nil {
					return err
				}
			}
		case iu.EventLocal:
			if d, ok := ev.Local.(decoded); ok {
				if err := r.decoded(ctx, d); err != nil {
					return err
				}
			}
		case iu.EventInputDone:
			if s := r.cur; s != nil {
				s.closed = true
				return r.finish(ctx, s)
			}
			return nil
		}
		if err := r.advance(ctx); err != nil {
			return err
		}
	}
}

func (r *runner) update(ctx context.Context, up iu.Update) error {
	switch pl := up.IU.Payload.(type) {
	case linearAudio:
		if up.Type == iu.Add {
			r.linear, r.nextLinear = true, pl.LinearAudio()
		}
	case audio.Frame:
		if up.Type == iu.Add {
			lin := r.nextLinear
			r.nextLinear = audio.Frame{}
			if !lin.SameStretch(pl) {
				lin.Samples = pl.Samples // none for this stretch: the audio stands in
			}
			return r.frame(ctx, pl, lin.Samples)
		}
	case control.Command:
		if s := r.cur; s != nil && up.Type == iu.Add && pl.Action == control.Interrupt {
			s.decided = true
		}
	case vad.Candidate:
		switch up.Type {
		case iu.Add:
			if pl.Overlap && r.cur == nil {
				return r.begin(ctx, up.IU.ID, pl.Start)
			}
		case iu.Revoke:
			if s := r.cur; s != nil && !s.closed && s.u.GroundedIn[0] == up.IU.ID {
				s.closed = true
				s.ev.Dropped = true
				s.ev.Ended = true
				s.ev.End = dur(s.analysed)
				return r.finish(ctx, s)
			}
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			if pl.Overlap && r.cur == nil {
				return r.begin(ctx, up.IU.ID, pl.Start)
			}
		case iu.Commit:
			if s := r.cur; s != nil && !s.closed {
				s.closed = true
				if !s.ev.Ended {
					s.ev.Ended, s.ev.End = true, pl.End
				}
			}
		}
	}
	return nil
}

func dur(n int64) time.Duration { return audio.SamplesToDuration(n, audio.PipelineRate) }

// frame takes in user audio, and beside it what to decode of it: it keeps the recent
// past for pre-rolls and feeds the sound being followed.
func (r *runner) frame(ctx context.Context, f audio.Frame, decode []float32) error {
	if f.Rate != audio.PipelineRate || f.Channels != 1 {
		return fmt.Errorf("overlap: audio %s: want %d Hz mono", f.Summary(), audio.PipelineRate)
	}
	if f.Start != r.pos || len(r.recent) == 0 {
		// The first frame, or a gap: the recent past starts here.
		r.recent, r.recentDecode, r.recentAt = r.recent[:0], r.recentDecode[:0], f.Start
	}
	r.recent = append(r.recent, f.Samples...)
	r.recentDecode = append(r.recentDecode, decode...)
	r.pos = f.End()
	if keep := max(r.preRoll, r.linearPreRoll) + int64(audio.PipelineRate); int64(len(r.recent)) > 2*keep {
		drop := int64(len(r.recent)) - keep
		r.recent = append(r.recent[:0], r.recent[drop:]...)
		r.recentDecode = append(r.recentDecode[:0], r.recentDecode[drop:]...)
		r.recentAt += drop
	}
	if s := r.cur; s != nil && !s.closed {
		r.feed(s, f.Start, f.Samples, decode)
		return r.analyse(ctx, s)
	}
	return nil
}

// feed appends audio at stream position at, and what to decode of it, to the sound
// (what it already has is skipped).
func (r *runner) feed(s *sound, at int64, samples, decode []float32) {
	end := s.end()
	if at+int64(len(samples)) <= end {
		return
	}
	if at > end {
		gap := make([]float32, at-end) // lost audio: silence
		s.samples, s.decode = append(s.samples, gap...), append(s.decode, gap...)
	} else {
		samples, decode = samples[end-at:], decode[end-at:]
	}
	s.samples, s.decode = append(s.samples, samples...), append(s.decode, decode...)
}

// begin starts following a sound that began at stream time start (the VAD IU id
// grounds it).
func (r *runner) begin(ctx context.Context, id iu.ID, start time.Duration) error {
	st := audio.DurationToSamples(start, audio.PipelineRate)
	preRoll := r.preRoll
	if r.linear {
		preRoll = r.linearPreRoll
	}
	from := max(st-preRoll, r.recentAt)
	s := &sound{start: st, from: from, an: newAnalyzer(), analysed: st, decodedTo: st}
	s.ev = Evidence{Start: start}
	if from < r.pos {
		s.samples = append(s.samples, r.recent[from-r.recentAt:]...)
		s.decode = append(s.decode, r.recentDecode[from-r.recentAt:]...)
	}
	r.cur = s
	s.u = r.p.NewIU(s.ev, id)
	if err := r.p.Send(ctx, iu.AddOf(s.u)); err != nil {
		return fmt.Errorf("overlap: %w", err)
	}
	return r.analyse(ctx, s)
}

// analyse runs the acoustic analysis over the sound's new audio and reports what
// changed.
func (r *runner) analyse(ctx context.Context, s *sound) error {
	end := s.end()
	if end <= s.analysed || s.analysed < s.from {
		return nil
	}
	s.an.push(s.samples[s.analysed-s.from:end-s.from], s.ac.add)
	s.analysed = end
	prev := s.ev
	s.ev.Heard = dur(end - s.start)
	s.ev.Sound, s.ev.Voiced, s.ev.HumLike = s.ac.judge()
	quiet := int64(s.ac.quietFrames()) * hop
	ended := quiet >= r.endSilence && len(s.ac.frames)*hop > int(quiet)
	if ended != s.ev.Ended && !s.closed {
		s.ev.Ended = ended
		s.ev.End = 0
		if ended {
			s.ev.End = dur(end - quiet)
		}
	}
	if s.ev.Sound != prev.Sound || s.ev.Ended != prev.Ended {
		return r.send(ctx, s)
	}
	return nil
}

// send reports the sound's evidence (an UPDATE of its IU).
func (r *runner) send(ctx context.Context, s *sound) error {
	up := iu.UpdateOf(s.u, s.ev)
	s.u.Payload = s.ev
	if err := r.p.Send(ctx, up); err != nil {
		return fmt.Errorf("overlap: %w", err)
	}
	return nil
}

// advance starts the next decode when one is due, and commits a closed sound once its
// last decode is in.
func (r *runner) advance(ctx context.Context) error {
	s := r.cur
	if s == nil || s.decoding != 0 {
		return nil
	}
	end := s.end()
	if s.ev.Ended && s.ev.End > 0 {
		end = min(end, audio.DurationToSamples(s.ev.End, audio.PipelineRate)+r.endSilence)
	}
	end = min(end, s.start+r.maxSound)
	due := end-s.start >= r.first && end-s.decodedTo >= r.hop
	final := (s.closed || s.ev.Ended) && end > s.decodedTo
	if !s.ev.Dropped && !s.decided && (due || final) {
		r.decode(ctx, s, end)
		return nil
	}
	if s.closed {
		return r.finish(ctx, s)
	}
	return nil
}

// decode starts a worker that decodes the sound (with its pre-roll) up to stream
// position end. The slice it gets is capped, so that the module's appends never write
// where it reads.
func (r *runner) decode(ctx context.Context, s *sound, end int64) {
	r.jobs++
	seq := r.jobs
	s.decoding, s.decodedTo = seq, end
	samples := s.decode[: end-s.from : end-s.from]
	rec := r.m.rec
	r.p.Go(func(w iu.Worker) {
		hyp, err := rec.FinalOf(ctx, samples)
		_ = w.Post(ctx, decoded{seq: seq, to: end, hyp: hyp, err: err})
	})
}

func (r *runner) decoded(ctx context.Context, d decoded) error {
	s := r.cur
	if s == nil || s.decoding != d.seq {
		return nil // the sound was dropped meanwhile
	}
	s.decoding = 0
	if d.err != nil {
		r.log.Warn("overlap decode failed", zap.Error(d.err))
		return nil
	}
	words := make([]Word, 0, len(d.hyp.Words))
	for _, w := range d.hyp.Words {
		words = append(words, Word{Text: w.Text, Confidence: w.Confidence})
	}
	s.ev.Words = words
	s.ev.DecodedTo = dur(d.to - s.start)
	s.ev.Decodes++
	return r.send(ctx, s)
}

// finish commits the sound's IU with its final evidence.
func (r *runner) finish(ctx context.Context, s *sound) error {
	r.cur = nil
	s.u.Payload = s.ev
	if err := r.p.Send(ctx, iu.UpdateOf(s.u, s.ev), iu.CommitOf(s.u)); err != nil {
		return fmt.Errorf("overlap: %w", err)
	}
	return nil
}
