package turnend

import (
	"context"
	"errors"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/turnend/prosody"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

// Completion is what the module needs of the LLM's estimate that the user's turn is
// complete (llm.TurnCompletion implements it).
type Completion interface {
	iu.Payload
	// TurnCompletion returns the user text the estimate is about and the probability.
	// pMax is the most the probability can be (an engine that saw only the likeliest
	// tokens); p when it is known exactly.
	TurnCompletion() (text string, p, pMax float64)
}

// Module ends the user's turn by a Policy: it is the network's one producer of
// vad.EndOfTurn IUs. It consumes the user's audio (for the stream position), the VAD's
// candidates, segments and end of stream, the recogniser's words and the LLM's
// completion estimates. The manager's interrupts say that the turn in progress took the
// floor. Once the VAD's stream ended it ends the turn in progress and stops.
type Module struct {
	name   string
	policy Policy
	waits  Waits
}

// New returns the module.
func New(name string, policy Policy, waits Waits) *Module {
	return &Module{name: name, policy: policy, waits: waits}
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	a := &adapter{p: p, log: p.Logger(), d: NewDecider(m.policy, m.waits)}
	if hp, ok := m.policy.(pitchHearer); ok && hp.HearsPitch() {
		a.pitch = prosody.NewTracker()
	}
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			return a.emit(ctx, a.d.Finish())
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if err := a.update(ctx, up); errors.Is(err, errStreamEnded) {
					// Its work is done; ending it ends its part in the input of the
					// modules it feeds, which may also feed it.
					return nil
				} else if err != nil {
					return err
				}
			}
		}
	}
}

// pitchHearer is a Policy that reads the pitch of the speech's end (Signals.Prosody).
type pitchHearer interface{ HearsPitch() bool }

// errStreamEnded says the stream ended and its last turn was ended.
var errStreamEnded = errors.New("turnend: the stream ended")

// adapter turns IUs into Decider calls; it belongs to the module's goroutine.
type adapter struct {
	p   *iu.Ports
	log *zap.Logger
	d   *Decider

	// pitch follows the user's audio, for the prosody of each segment's end (nil: the
	// policy does not read it); heard is the stream position it reached.
	pitch *prosody.Tracker
	heard int64

	words asr.WordList
	// endedUtterance is the recogniser's utterance of the last turn ended: its words,
	// committed after the end, belong to that turn.
	endedUtterance int
	curUtterance   int
	segments       []iu.ID // the turn's segments, which its end is grounded in
}

func (a *adapter) update(ctx context.Context, up iu.Update) error {
	u := up.IU
	switch pl := u.Payload.(type) {
	case audio.Frame:
		if up.Type == iu.Add {
			a.hear(pl)
			return a.emit(ctx, a.d.Audio(audio.SamplesToDuration(pl.End(), pl.Rate)))
		}
	case vad.Candidate:
		switch up.Type {
		case iu.Add:
			a.d.Candidate()
		case iu.Revoke:
			return a.emit(ctx, a.d.CandidateDropped())
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			a.d.SpeechStart(pl.Start)
			a.segments = append(a.segments, u.ID)
		case iu.Commit:
			return a.emit(ctx, a.d.SpeechEnd(pl.End, a.ending(pl.End)))
		}
	case asr.Word:
		if pl.Utterance <= a.endedUtterance {
			return nil
		}
		a.curUtterance = pl.Utterance
		if !a.words.Apply(up) {
			return nil
		}
		var texts []string
		var lastEnd time.Duration
		for _, w := range a.words.Words() {
			texts = append(texts, w.Text)
			lastEnd = w.End
		}
		return a.emit(ctx, a.d.Words(texts, lastEnd))
	case control.Command:
		if up.Type == iu.Add && pl.Action == control.Interrupt {
			a.d.Interrupted(pl.UserKeptTurn)
		}
	case Completion:
		if up.Type == iu.Add {
			text, p, pMax := pl.TurnCompletion()
			return a.emit(ctx, a.d.Completion(text, p, pMax))
		}
	case vad.EndOfStream:
		// Taken from the VAD, not from the audio's own end: the VAD sends it after the
		// last speech it found in the stream.
		if up.Type != iu.Add {
			return nil
		}
		if err := a.emit(ctx, a.d.EndOfStream(pl.End)); err != nil {
			return err
		}
		return errStreamEnded
	}
	return nil
}

func (a *adapter) emit(ctx context.Context, e *EndOfTurn) error {
	if e == nil {
		return nil
	}
	a.endedUtterance = max(a.endedUtterance, a.curUtterance)
	a.words.Reset()
	a.log.Debug("end of turn", zap.Duration("speech_end", e.SpeechEnd), zap.Duration("silence", e.Silence), zap.String("reason", e.Reason))
	u := a.p.NewIU(vad.EndOfTurn{SpeechStart: e.SpeechStart, SpeechEnd: e.SpeechEnd, Silence: e.Silence, Reason: e.Reason}, a.segments...)
	a.segments = nil
	return a.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

// hear feeds the pitch tracker the frame (at 16 kHz, the pipeline's rate; other audio
// only moves it on).
func (a *adapter) hear(f audio.Frame) {
	if a.pitch == nil {
		return
	}
	start, end := f.Start, f.End()
	if start > a.heard {
		a.pitch.Skip(start - a.heard)
		a.heard = start
	}
	if end <= a.heard {
		return
	}
	if f.Rate != prosody.Rate || f.Channels != 1 {
		a.pitch.Skip(end - a.heard)
	} else {
		a.pitch.Push(f.Samples[a.heard-start:])
	}
	a.heard = end
}

// ending is the pitch cue of the turn's speech up to end.
func (a *adapter) ending(end time.Duration) prosody.Cue {
	start, ok := a.d.TurnStart()
	if !ok || a.pitch == nil {
		return prosody.Unknown
	}
	return a.pitch.Ending(audio.DurationToSamples(start, prosody.Rate), audio.DurationToSamples(end, prosody.Rate))
}
