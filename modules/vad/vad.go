// Package vad is the voice activity module: it scores the user's audio for speech as it
// arrives (with a Scorer: Silero VAD, which package silero opens) and reports each
// stretch of user speech as a vad.Segment IU, announced by a vad.Candidate and, as it
// ends, a vad.Pause. It also follows the agent's own speaking state, so that a segment
// says whether the user started speaking while the agent was audible. Whether a silence
// ends the user's turn is not the VAD's to say: package turnend decides it and sends
// the vad.EndOfTurn IUs, a payload defined here beside the segments it spans.
package vad

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
)

// Config configures the VAD module. The segmentation defaults are libwhisper's
// (whisper_vad_default_params), so that `agent vad` and whisper.cpp's own tools agree;
// EndTrim, which dates ends by the level, is not libwhisper's and is off by default.
type Config struct {
	// Model is the Silero VAD model in whisper.cpp's ggml format: a file, or a name from
	// 'agent models list' (silero-vad).
	Model string `yaml:"model"`
	// Threads for the model (1 when zero).
	Threads int `yaml:"threads"`
	// Threshold is the speech probability at which speech starts (and a pending end is
	// cancelled).
	Threshold float32 `yaml:"threshold"`
	// NegThreshold is the probability below which silence starts; zero means
	// Threshold-0.15 (at least 0.01), as in libwhisper. Probabilities in between keep
	// whatever state the detector is in: that is the hysteresis.
	NegThreshold float32 `yaml:"neg_threshold"`
	// MinSpeech is how long speech must last to count (and how long after its start a
	// segment is confirmed at the earliest).
	MinSpeech time.Duration `yaml:"min_speech"`
	// MinSilence is how long silence must last to end a segment.
	MinSilence time.Duration `yaml:"min_silence"`
	// SpeechPad extends every segment on both sides (pre-roll and post-roll).
	SpeechPad time.Duration `yaml:"speech_pad"`
	// MergeGap joins segments separated by less silence than this (libwhisper: 200 ms;
	// the predictive pipeline takes at most end_of_turn.short plus speech_pad, to the
	// nearest whole 32 ms window).
	// A segment's end is reported only once this much silence followed it.
	MergeGap time.Duration `yaml:"merge_gap"`
	// EndOfTurn is the silence after the last segment that ends the user's turn under
	// the silence policy (modules/turnend, the incremental and turn-based pipelines'),
	// as the VAD hears it: HeardSilence.
	EndOfTurn time.Duration `yaml:"end_of_turn"`
	// PauseAfter reports a tentative pause (Pause.Tentative) once this much silence
	// followed the open segment's speech, before MinSilence makes it sure: for listeners
	// that may start getting ready for the end of the user's turn sooner, at the price of
	// pauses withdrawn more often. 0 (or MinSilence or more) reports pauses at
	// MinSilence only.
	PauseAfter time.Duration `yaml:"pause_after"`
	// EndTrim dates a speech end by the audio's level, up to this long before the
	// window where Silero's probability fell: Silero stays sure of speech for 60–130 ms
	// after the voice stops, and the waits for the end of a turn that count from the end
	// (MergeGap, the holds) start that late. The voice has stopped where the level has
	// fallen 25 dB below its peak of the last second; where it does not fall that far (a
	// noisy room), the end stays Silero's. Whether the speech ended is still Silero's to
	// say (MinSilence counts from its fall): the level falls in a word's stop consonants
	// too. 0 (the default) keeps libwhisper's segments exactly: trimmed ends answer
	// sooner, but pauses of 200–300 ms then end turns, and a hesitant speaker's barge-in
	// becomes two (docs/TURN-TAKING.md).
	EndTrim time.Duration `yaml:"end_trim"`
}

// DefaultConfig returns libwhisper's segmentation defaults and a 700 ms end of turn.
// Model is empty: callers point it at their model directory.
func DefaultConfig() Config {
	return Config{
		Threads:    1,
		Threshold:  0.5,
		MinSpeech:  250 * time.Millisecond,
		MinSilence: 100 * time.Millisecond,
		SpeechPad:  30 * time.Millisecond,
		MergeGap:   200 * time.Millisecond,
		EndOfTurn:  700 * time.Millisecond,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	// Written so that NaN, which fails every comparison, is out of range too.
	case !(c.Threshold > 0 && c.Threshold <= 1):
		return fmt.Errorf("vad: threshold %g is not in (0, 1]", c.Threshold)
	case !(c.NegThreshold >= 0 && c.NegThreshold <= c.Threshold):
		return fmt.Errorf("vad: neg_threshold %g is not in [0, threshold]", c.NegThreshold)
	case c.Threads < 0:
		return fmt.Errorf("vad: threads %d must not be negative (0: one)", c.Threads)
	case c.MinSpeech < 0, c.MinSilence < 0, c.SpeechPad < 0, c.MergeGap < 0, c.PauseAfter < 0, c.EndTrim < 0:
		return errors.New("vad: durations must not be negative")
	case c.EndTrim > maxEndTrim:
		return fmt.Errorf("vad: end_trim %v is more than %v: Silero is never that late, and a word's quiet end would be cut", c.EndTrim, maxEndTrim)
	case c.EndOfTurn <= 0:
		return fmt.Errorf("vad: end_of_turn %v must be positive", c.EndOfTurn)
	}
	return nil
}

// maxEndTrim bounds EndTrim: Silero's lag is a few windows.
const maxEndTrim = 320 * time.Millisecond

func (c Config) params() detectorParams {
	neg := c.NegThreshold
	if neg == 0 {
		neg = max(c.Threshold-0.15, 0.01)
	}
	n := func(d time.Duration) int64 { return audio.DurationToSamples(d, audio.PipelineRate) }
	return detectorParams{
		threshold: c.Threshold, negThreshold: neg,
		minSpeech: n(c.MinSpeech), minSilence: n(c.MinSilence),
		pad: n(c.SpeechPad), mergeGap: n(c.MergeGap),
		pauseAfter: n(c.PauseAfter),
		endTrim:    n(c.EndTrim),
	}
}

// Segment is the payload of a user speech segment (kind "vad"). It is ADDed when the
// onset is confirmed, with Start back-dated to the onset (padding included) and End
// zero, and COMMITted when the segment ended, with End set.
type Segment struct {
	// Start and End are stream positions (time since the start of the audio stream).
	Start, End time.Duration
	// Overlap says that the agent was audible when the user started speaking (or became
	// audible before the onset was confirmed): the user may be barging in.
	Overlap bool
	// Trimmed is how much earlier End is dated than where Silero's probability fell
	// (Config.EndTrim; 0 without it). A recogniser that decodes a fixed silence after
	// the speech counts it from End+Trimmed, so that trimming changes no word.
	Trimmed time.Duration
}

// Kind implements iu.Payload.
func (Segment) Kind() string { return "vad" }

// Summary implements iu.Payload.
func (s Segment) Summary() string {
	end := "…"
	if s.End > 0 {
		end = fmt.Sprintf("%.2fs", s.End.Seconds())
	}
	ov := ""
	if s.Overlap {
		ov = " overlap"
	}
	return fmt.Sprintf("speech %.2fs–%s%s", s.Start.Seconds(), end, ov)
}

// Pause is the payload of a pause in the open segment's speech (kind "vad-pause"),
// grounded in the segment: ADDed once MinSilence of silence followed the speech, with
// End the padded end the segment will have; REVOKEd when the speech resumes within
// MergeGap (the segment goes on); COMMITted just before the segment, when it ended
// there. It comes MergeGap − MinSilence (about 60 ms with the defaults) before the
// segment's end, for listeners that prepare for the end (a speculative final decode).
// With Config.PauseAfter it is ADDed sooner, Tentative, after that much silence: then
// UPDATEd (Tentative false) when MinSilence passed, or REVOKEd if the speech goes on
// before.
type Pause struct {
	End time.Duration
	// SpeechEnd is where the speech stopped: End without the padding. The VAD heard
	// no speech after it.
	SpeechEnd time.Duration
	// Tentative says the silence has not lasted MinSilence yet.
	Tentative bool
	// Trimmed is as Segment's.
	Trimmed time.Duration
	// Overlap says that the agent was audible when the pause was reported (or made
	// sure): the speech ended over the agent's voice (a backchannel goes on while the
	// agent speaks; a barge-in has stopped it by then).
	Overlap bool
}

// Kind implements iu.Payload.
func (Pause) Kind() string { return "vad-pause" }

// Summary implements iu.Payload.
func (p Pause) Summary() string {
	if p.Tentative {
		return fmt.Sprintf("pause after %.2fs (tentative)", p.End.Seconds())
	}
	return fmt.Sprintf("pause after %.2fs", p.End.Seconds())
}

// Candidate is the payload of possible speech (kind "vad-candidate"): ADDed at the
// first window that sounds like speech, COMMITted when the speech lasted long enough to
// be a Segment (whose ADD follows), REVOKEd when it stopped too soon (noise, a click).
// It arrives MinSpeech earlier than the Segment, so a dialogue manager can hold the
// agent's voice at once and let it go on if the candidate is withdrawn.
type Candidate struct {
	// Start is the stream position where the possible speech began (padded).
	Start time.Duration
	// Overlap says that the agent was audible.
	Overlap bool
}

// Kind implements iu.Payload.
func (Candidate) Kind() string { return "vad-candidate" }

// Summary implements iu.Payload.
func (c Candidate) Summary() string {
	if c.Overlap {
		return fmt.Sprintf("possible speech at %.2fs overlap", c.Start.Seconds())
	}
	return fmt.Sprintf("possible speech at %.2fs", c.Start.Seconds())
}

// EndOfTurn is the payload that ends the user's turn (kind "eot"), ADDed and COMMITted
// at once. Package turnend sends it, when its policy's silence followed the turn's last
// segment (or the stream ended); it spans the segments the VAD reported.
type EndOfTurn struct {
	// SpeechStart and SpeechEnd span the turn's speech (padded segment bounds).
	SpeechStart, SpeechEnd time.Duration
	// Silence is how much silence followed SpeechEnd when the turn was ended.
	Silence time.Duration
	// Reason says why the policy ended the turn.
	Reason string
}

// Kind implements iu.Payload.
func (EndOfTurn) Kind() string { return "eot" }

// Summary implements iu.Payload.
func (e EndOfTurn) Summary() string {
	s := fmt.Sprintf("end of turn: speech %.2fs–%.2fs, silence %.2fs", e.SpeechStart.Seconds(), e.SpeechEnd.Seconds(), e.Silence.Seconds())
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// EndOfStream is the payload the VAD sends when its audio stream ended (kind
// "vad-eos"), after its last candidate, pause and segment: no more of the user's speech
// will be reported. End is where the stream ended.
type EndOfStream struct{ End time.Duration }

// Kind implements iu.Payload.
func (EndOfStream) Kind() string { return "vad-eos" }

// Summary implements iu.Payload.
func (e EndOfStream) Summary() string {
	return fmt.Sprintf("the VAD heard the whole stream (%.2fs)", e.End.Seconds())
}

// Scorer scores audio for speech, 16 kHz mono, window by window; package silero opens
// one (Silero VAD through libwhisper).
type Scorer interface {
	// WindowSize is the number of samples per probability.
	WindowSize() int
	// Probs feeds samples and returns the probabilities of the windows they completed.
	Probs(chunk []float32) ([]float32, error)
	// Flush scores the incomplete last window, padded with silence.
	Flush() ([]float32, error)
	// Reset forgets the stream.
	Reset()
}

// audible is what the VAD needs from the speaker's progress IUs.
type audible interface{ Audible() bool }

// Module is the VAD module. It consumes audio.Frame IUs (16 kHz mono), the
// audio.EndOfStream that ends them, and any payload with an Audible() bool method (the
// speaker's progress), and produces Candidate, Pause and Segment IUs and, after the last
// of them, an EndOfStream; it forwards nothing.
type Module struct {
	name   string
	cfg    Config
	scorer Scorer
	// maxLag is the longest a frame waited, from its IU's creation to the end of its
	// scoring (nanoseconds; written by Run's goroutine, read by MaxLag after it).
	maxLag atomic.Int64
}

// MaxLag returns how far the VAD fell behind its input at worst: the longest time from
// an audio IU's creation (by the microphone or the recording's source) to the end of its
// scoring, over every Run so far. Zero on a virtual clock, where computing takes no time.
func (m *Module) MaxLag() time.Duration { return time.Duration(m.maxLag.Load()) }

// HeardSilence returns the silence after a segment's padded end at which the VAD has
// heard at least d of it. Silero's speech ends where a scored window begins, and
// silence is heard a whole window at a time from there, so d is rounded up to the end
// of the window that completes it: a turn-end policy that waits for the VAD's
// end_of_turn waits this long. An end dated by the level (EndTrim) lies between
// windows: the wait then ends at the end of a window up to one later.
func (m *Module) HeardSilence(d time.Duration) time.Duration {
	n := func(d time.Duration) int64 { return audio.DurationToSamples(d, audio.PipelineRate) }
	w := int64(m.scorer.WindowSize())
	pad := n(m.cfg.SpeechPad)
	windows := (pad + n(d) + w - 1) / w
	return dur(windows*w - pad)
}

// NearestWindows returns the silence of whole windows of window samples nearest to d.
// The VAD hears silence a window at a time from where Silero's speech stopped, so a
// merge gap of d reports a segment's end only at the end of the window that completes
// d: NearestWindows(d) reports it within half a window of d.
func NearestWindows(d time.Duration, window int) time.Duration {
	w := int64(window)
	return dur((audio.DurationToSamples(d, audio.PipelineRate) + w/2) / w * w)
}

// New returns a VAD module that scores with s. The caller keeps ownership of s.
func New(name string, cfg Config, s Scorer) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("vad: no scorer")
	}
	return &Module{name: name, cfg: cfg, scorer: s}, nil
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	m.scorer.Reset()
	r := &runner{m: m, p: p, lastAudible: -1}
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
		case iu.EventInputDone:
			return r.finish(ctx)
		}
	}
}

// runner is the state of one Run, owned by the module's goroutine.
type runner struct {
	m   *Module
	p   *iu.Ports
	det *detector
	pos int64 // stream position after the last sample fed to the scorer

	// recent holds the latest audio IUs, to ground segments in the audio of their onset.
	recent []frameRef

	audibleNow  bool
	lastAudible int64 // stream position where the agent was last audible; -1 never

	open      *iu.IU
	candidate *iu.IU // the possible speech awaiting confirmation
	pause     *iu.IU // the open segment's pause, until it resumes or the segment ends
	finished  bool   // the stream ended and the detector was flushed
}

type frameRef struct {
	id         iu.ID
	start, end int64
}

// groundingWindow bounds how much audio a segment's onset can be grounded in.
const groundingWindow = 2 * audio.PipelineRate

func (r *runner) update(ctx context.Context, up iu.Update) error {
	if up.Type != iu.Add && up.Type != iu.UpdatePayload {
		return nil // frames arrive as ADD+COMMIT; the commit adds nothing
	}
	switch pl := up.IU.Payload.(type) {
	case audio.EndOfStream:
		// In an agent network the VAD's input ends only after the modules reading its
		// output have stopped, so it flushes here, and passes the end on after its last
		// segment: whoever reads the VAD knows the user has finished.
		if up.Type != iu.Add {
			return nil
		}
		if err := r.finish(ctx); err != nil {
			return err
		}
		u := r.p.NewIU(EndOfStream{End: pl.End()}, up.IU.ID)
		if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
			return fmt.Errorf("vad: %w", err)
		}
		return nil
	case audio.Frame:
		if up.Type == iu.Add {
			if err := r.frame(ctx, up.IU.ID, pl); err != nil {
				return err
			}
			if lag := r.p.Now().Sub(up.IU.Created); lag > r.m.MaxLag() {
				r.m.maxLag.Store(int64(lag))
			}
			return nil
		}
	case audible:
		r.audibleNow = pl.Audible()
		if r.audibleNow {
			r.lastAudible = r.pos
		}
	}
	return nil
}

func (r *runner) frame(ctx context.Context, id iu.ID, f audio.Frame) error {
	if r.finished {
		return fmt.Errorf("vad: audio %s after the end of the stream", f.Summary())
	}
	if f.Rate != audio.PipelineRate || f.Channels != 1 {
		return fmt.Errorf("vad: audio %s: want %d Hz mono", f.Summary(), audio.PipelineRate)
	}
	samples := f.Samples
	if r.det == nil {
		r.det = newDetector(r.m.cfg.params(), int64(r.m.scorer.WindowSize()), f.Start)
		r.pos = f.Start
	}
	switch {
	case f.Start > r.pos+audio.MaxGap:
		// A jump this large is a new stream (a restarted capture), not a lost block:
		// end what was running and start over at the new position.
		if err := r.flush(ctx); err != nil {
			return err
		}
		r.m.scorer.Reset()
		r.det = newDetector(r.m.cfg.params(), int64(r.m.scorer.WindowSize()), f.Start)
		r.pos = f.Start
	case f.Start > r.pos:
		// Audio went missing (a dropped capture block): score silence in its place so
		// that stream positions stay true.
		if err := r.score(ctx, make([]float32, f.Start-r.pos)); err != nil {
			return err
		}
	case f.Start < r.pos:
		// Audio already scored (a replayed block): skip what was seen.
		skip := r.pos - f.Start
		if skip >= int64(len(samples)) {
			return nil
		}
		samples = samples[skip:]
	}
	r.recent = append(r.recent, frameRef{id: id, start: f.Start, end: f.End()})
	for len(r.recent) > 1 && r.recent[0].end < f.End()-groundingWindow {
		r.recent = r.recent[1:]
	}
	if r.audibleNow {
		r.lastAudible = f.End()
	}
	return r.score(ctx, samples)
}

func (r *runner) score(ctx context.Context, samples []float32) error {
	r.det.Hear(samples)
	probs, err := r.m.scorer.Probs(samples)
	if err != nil {
		return fmt.Errorf("vad: %w", err)
	}
	r.pos += int64(len(samples))
	w := int64(r.m.scorer.WindowSize())
	for _, pr := range probs {
		if err := r.events(ctx, r.det.Push(pr, r.det.Position()+w)); err != nil {
			return err
		}
	}
	return nil
}

// finish flushes the detector at the end of the stream; audio after it is an error.
func (r *runner) finish(ctx context.Context) error {
	if r.finished {
		return nil
	}
	r.finished = true
	return r.flush(ctx)
}

// flush ends whatever segment is running.
func (r *runner) flush(ctx context.Context) error {
	if r.det == nil {
		return nil
	}
	probs, err := r.m.scorer.Flush()
	if err != nil {
		return fmt.Errorf("vad: %w", err)
	}
	for _, pr := range probs {
		if err := r.events(ctx, r.det.Push(pr, r.pos)); err != nil {
			return err
		}
	}
	return r.events(ctx, r.det.Finish())
}

func dur(samples int64) time.Duration { return audio.SamplesToDuration(samples, audio.PipelineRate) }

// settle appends the commit or revoke (how) of the IU *held, if any, and forgets it.
func settle(held **iu.IU, how func(iu.IU) iu.Update, ups []iu.Update) []iu.Update {
	if *held != nil {
		ups = append(ups, how(**held))
		*held = nil
	}
	return ups
}

func (r *runner) events(ctx context.Context, evs []event) error {
	for _, ev := range evs {
		var ups []iu.Update
		switch ev.Kind {
		case evCandidate:
			c := Candidate{Start: dur(ev.Start), Overlap: r.audibleNow || r.lastAudible >= ev.RawStart}
			u := r.p.NewIU(c, r.grounding(ev.Start, ev.At)...)
			r.candidate = &u
			ups = append(ups, iu.AddOf(u))
		case evDropped:
			ups = settle(&r.candidate, iu.RevokeOf, ups)
		case evOnset:
			ups = settle(&r.candidate, iu.CommitOf, ups)
			seg := Segment{
				Start:   dur(ev.Start),
				Overlap: r.audibleNow || r.lastAudible >= ev.RawStart,
			}
			u := r.p.NewIU(seg, r.grounding(ev.Start, ev.At)...)
			r.open = &u
			ups = append(ups, iu.AddOf(u))
		case evPause:
			if r.open == nil {
				continue
			}
			u := r.p.NewIU(Pause{End: dur(ev.End), SpeechEnd: dur(min(ev.RawEnd, ev.End)), Tentative: ev.Tentative, Overlap: r.audibleNow, Trimmed: dur(ev.Trimmed)}, r.open.ID)
			r.pause = &u
			ups = append(ups, iu.AddOf(u))
		case evPauseSure:
			if r.pause == nil {
				continue
			}
			pl := r.pause.Payload.(Pause)
			pl.Tentative, pl.Overlap = false, r.audibleNow
			ups = append(ups, iu.UpdateOf(*r.pause, pl))
			r.pause.Payload = pl
		case evResume:
			ups = settle(&r.pause, iu.RevokeOf, ups)
		case evEnd:
			if r.open == nil {
				continue
			}
			ups = settle(&r.pause, iu.CommitOf, ups)
			u := *r.open
			seg := u.Payload.(Segment)
			seg.End, seg.Trimmed = dur(ev.End), dur(ev.Trimmed)
			u.Payload = seg
			r.open = nil
			ups = append(ups, iu.CommitOf(u))
		}
		if err := r.p.Send(ctx, ups...); err != nil {
			return fmt.Errorf("vad: %w", err)
		}
	}
	return nil
}

// grounding returns the audio IUs that overlap [start, end).
func (r *runner) grounding(start, end int64) []iu.ID {
	var ids []iu.ID
	for _, f := range r.recent {
		if f.end > start && f.start < end {
			ids = append(ids, f.id)
		}
	}
	return ids
}
