package asr

import (
	"context"
	"errors"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// Config configures the ASR module and its engine.
type Config struct {
	// Engine names the recogniser (the configuration reference lists the engines;
	// empty: the default).
	Engine string `yaml:"engine"`
	// Hop is how much new audio triggers the next partial hypothesis (0: the engine's
	// default, DefaultHop). Decodes never overlap: audio that arrives during one waits
	// for the next.
	Hop time.Duration `yaml:"hop"`
	// Agreement is n of the LocalAgreement-n policy: how many consecutive hypotheses
	// must agree before a word is reported.
	Agreement int `yaml:"agreement"`
	// EmitUnstable also reports the words local agreement has not confirmed yet (with
	// their lower Stability). They flicker: expect REVOKEs.
	EmitUnstable bool `yaml:"emit_unstable"`
	// PreRoll is audio before the VAD segment's (already padded) start that is decoded
	// with the utterance.
	PreRoll time.Duration `yaml:"pre_roll"`
	// Trailing is audio after the end of the turn's speech that the final decode
	// includes. With an engine that decodes finals on the side (a FinalDecoder: whisper,
	// pocketsphinx with final_pass) it is exactly this much, whatever the partial
	// decodes were fed. With other engines it is at least this much: their Final decodes
	// everything fed, and audio already fed for partial hypotheses, up to where the end
	// of turn came, is never taken back.
	Trailing time.Duration `yaml:"trailing"`
	// Speculative starts the final decode when the turn's last speech segment has ended
	// and Trailing audio followed, normally well before the end of turn, which then
	// commits its words (or decodes again if speech resumed or ends elsewhere): the words
	// are exactly those of a final decode started at the end of turn. It needs a
	// FinalDecoder. Costs: decodes that resumed speech throws away, and pocketsphinx's
	// models loaded a second time (about 90 MB). The turn-based baseline turns it off.
	Speculative bool `yaml:"speculative"`
	// PeekTrailing, when above zero, is the Trailing of the finals a Peeker gives of its
	// own: they normalise the audio by a mean learnt before it, so the silence after
	// the speech changes them little (agent wer -mode stream -trailing), and a shorter
	// one lets the speculation start at the VAD's pause.
	PeekTrailing time.Duration `yaml:"-"`
	// SpeculateAtPause lets the speculative final decode start from the VAD's pause
	// (MinSilence after the speech) rather than from the segment's end (MergeGap after
	// it), as soon as Trailing audio after the pause's end is in; a pause the speech
	// resumes after voids it.
	SpeculateAtPause bool `yaml:"-"`
	// EarlyFinal reports the words of a speculative final decode as soon as it is done,
	// before the end of turn (as uncommitted words with stability 1), so that a reply
	// can be prepared for the transcript the turn will most likely end with.
	EarlyFinal bool `yaml:"early_final"`
	// History is how much recent audio is kept for the pre-roll of the next utterance;
	// it must cover the VAD's onset confirmation delay plus padding and PreRoll.
	History time.Duration `yaml:"history"`
	// DecodeLinear decodes an echo canceller's linear output (the microphone less the
	// echo its filter predicts, before any suppression) instead of the cleaned audio,
	// where the canceller sends one (linearAudio IUs before the audio.Frame of the
	// same stretch). The suppressor cuts the first 100–250 ms of a voice over the
	// agent's and its high frequencies; the linear output keeps them, beside a residue
	// of the agent's voice.
	DecodeLinear bool `yaml:"decode_linear"`

	Whisper      WhisperConfig      `yaml:"whisper"`
	Pocketsphinx PocketsphinxConfig `yaml:"pocketsphinx"`
}

// DefaultConfig returns the defaults: the default engine (Engine empty), the engine's
// hop, LocalAgreement-2 and speculative final decoding.
func DefaultConfig() Config {
	return Config{
		Agreement:    2,
		PreRoll:      200 * time.Millisecond,
		Trailing:     300 * time.Millisecond,
		Speculative:  true,
		History:      3 * time.Second,
		DecodeLinear: true,
		Whisper:      DefaultWhisperConfig(),
		Pocketsphinx: DefaultPocketsphinxConfig(),
	}
}

// DefaultHop is the hop of an engine when the configuration gives none. Whisper decodes
// the whole utterance again for each partial hypothesis, so its hop is what keeps it
// real time on small machines (300 ms). Pocketsphinx decodes the
// audio as it comes and reading its hypothesis costs little, so a short hop only makes
// its words fresher (100 ms: a barge-in's words, and the words a reply is prepared for,
// are confirmed 200 ms sooner).
func DefaultHop(engine string) time.Duration {
	if engine == "whisper" {
		return 300 * time.Millisecond
	}
	return 100 * time.Millisecond
}

// EffectiveHop is the hop in force: Hop, or the engine's default.
func (c Config) EffectiveHop() time.Duration {
	if c.Hop > 0 {
		return c.Hop
	}
	return DefaultHop(c.Engine)
}

// Module is the ASR module. It consumes audio.Frame IUs (16 kHz mono), the VAD's
// vad.Segment IUs and its vad.EndOfStream, and the end-of-turn policy's vad.EndOfTurn
// IUs: a segment's onset starts an utterance (with pre-roll audio) or continues the
// current one, the end of turn triggers the final decode, or confirms the speculative
// one the end of the segment before started (Config.Speculative). With
// Config.DecodeLinear it decodes an echo canceller's linear output in place of the
// audio.Frame of the same stretch that follows it. It produces Word and Utterance IUs.
type Module struct {
	name   string
	cfg    Config
	engine Engine
}

// New returns an ASR module that recognises with e; the caller keeps ownership of e.
func New(name string, cfg Config, e Engine) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if e == nil {
		return nil, errors.New("asr: no engine")
	}
	return &Module{name: name, cfg: cfg, engine: e}, nil
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	r := &runner{
		m: m, p: p, log: p.Logger(),
		hop:      audio.DurationToSamples(m.cfg.EffectiveHop(), audio.PipelineRate),
		preRoll:  audio.DurationToSamples(m.cfg.PreRoll, audio.PipelineRate),
		trailing: audio.DurationToSamples(m.cfg.Trailing, audio.PipelineRate),
		history:  audio.DurationToSamples(m.cfg.History, audio.PipelineRate),
	}
	if fd, ok := m.engine.(FinalDecoder); ok && fd.StatelessFinal() {
		r.finalOf = fd
	}
	r.peeker, _ = m.engine.(Peeker)
	if q, ok := m.engine.(QuickFinals); ok && r.finalOf != nil && r.peeker == nil {
		r.quick = q.QuickFinals()
	}
	if r.decodesEnd() {
		r.speculate = m.cfg.Speculative
	} else if m.cfg.Speculative {
		r.log.Info("speculative final decoding is off: the engine's final hypothesis depends on more than the audio")
	}
	defer r.cancelJob()
	for {
		if (r.inputDone || r.speechEnded && r.cur == nil) && r.running == nil && len(r.queue) == 0 {
			return nil
		}
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
			res, ok := ev.Local.(jobResult)
			if !ok {
				continue
			}
			if err := r.result(ctx, res); err != nil {
				return err
			}
		case iu.EventInputDone:
			r.endInput()
		}
		if err := r.advance(ctx); err != nil {
			return err
		}
	}
}

// runner is the state of one Run, owned by the module's goroutine. Engine calls happen on
// one worker at a time; while a job runs, the engine belongs to the worker.
type runner struct {
	m                               *Module
	p                               *iu.Ports
	log                             *zap.Logger
	hop, preRoll, trailing, history int64

	// finalOf is the engine when it decodes finals on the side (FinalDecoder), peeker
	// when its streaming pass can give its final early (Peeker). With either, an
	// utterance's final decode covers its audio up to Trailing after the speech (a
	// peek: at least that, with what partial decodes fed after it), and may start
	// before the end of turn when speculate is set. Other engines' final decode is
	// Final after the rest of the audio was fed.
	finalOf   FinalDecoder
	peeker    Peeker
	speculate bool
	// quick: the latest partial may be the final of an utterance whose speech it
	// decoded all of (QuickFinals).
	quick bool

	// recent holds the latest audio, for the pre-roll of the next utterance.
	recent []audioRef
	// decodedTo is the end of the last ended utterance: the next one starts no earlier,
	// so that no audio is decoded twice.
	decodedTo int64

	// nextLinear is the linear output for the audio.Frame that comes next
	// (Config.DecodeLinear).
	nextLinear audio.Frame

	cur    *utterance   // the utterance of the turn in progress, if any
	queue  []*utterance // utterances not committed; the engine works on queue[0]
	nextID int

	running   *job               // the engine job in flight, if any
	cancel    context.CancelFunc // cancels the job in flight
	jobs      int                // jobs started, for their sequence numbers
	inputDone bool
	// speechEnded: the VAD heard the whole stream (vad.EndOfStream); no audio follows.
	speechEnded bool
}
