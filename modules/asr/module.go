package asr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/vad"
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
	// of the agent's voice (docs/MEASUREMENTS.md: a barge-in's words).
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
// real time on small machines (300 ms: docs/MEASUREMENTS.md). Pocketsphinx decodes the
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

type audioRef struct {
	id      iu.ID
	start   int64
	samples []float32
}

func (a audioRef) end() int64 { return a.start + int64(len(a.samples)) }

type utterance struct {
	id    int
	start int64 // stream position of the first sample
	recv  int64 // stream position after the last sample received
	fed   int64 // stream position after the last sample handed to the streaming pass
	end   int64 // stream position after the last sample to decode (once ended)
	ended bool

	// audio holds the samples from start to recv. Workers get slices of it capped at
	// their length, so the module's appends never write where a worker reads.
	audio []float32
	// skipped counts stream samples missing from audio (gaps longer than audio.MaxGap are
	// not filled), so that audio[i] is at stream position start+skipped+i after them.
	skipped int64
	frames  []frameSpan
	started bool

	agree *LocalAgreement
	words []emitted

	speechStart, speechEnd int64 // from the end of turn; -1 when unknown

	// The turn's speech segments, which tell when to speculate: seg is the open
	// segment ("" when none), segEnd the end of the last one that ended (-1: none yet)
	// or, while paused, the end the open one will have if its speech does not resume.
	// A tentative pause (sure false) stops feeding the silence after it, and is
	// speculated on when the final is a peek; a sure one always.
	seg    iu.ID
	segEnd int64
	paused bool
	sure   bool
	// fin is the final decode of the utterance (jobEnd), running or done: started
	// speculatively when the last segment ended, or at the end of turn.
	fin *finalDecode
	// own says whether the utterance's final is the streaming pass's own (a Peeker's
	// PeekFinal) or FinalOf's, once the engine said so after Start.
	own ownFinal
	// overAgent: the utterance began while the agent was audible (vad.Segment.Overlap)
	// and the agent was still audible at its pauses. Its final is FinalOf's
	// when the engine has one: a sound over the agent's voice (a backchannel) does not
	// sound like what the streaming pass adapted to, and its words decide whether it is
	// a turn at all. A barge-in has stopped the agent by the time the user pauses.
	overAgent bool
	// eotAt is when the end of turn arrived (clock time), for the latency log.
	eotAt time.Time
}

// ownFinal is what an engine said of an utterance's final (Peeker.OwnFinal).
type ownFinal uint8

const (
	ownUnknown ownFinal = iota // not started yet, or no Peeker
	ownYes                     // the streaming pass's own: fed to the end, then PeekFinal
	ownNo                      // FinalOf's
)

// finalDecode is a final decode of an utterance's audio from its start to end (a peek
// may cover some audio after end that partial decodes had fed already).
type finalDecode struct {
	seq         int // the job that runs it
	end         int64
	speculative bool // started before the end of turn
	started     time.Time
	done        bool
	hyp         Hypothesis
}

type frameSpan struct {
	id         iu.ID
	start, end int64
}

type emitted struct {
	u    iu.IU
	word Word
}

// take appends the part of an audio IU that belongs to the utterance.
func (u *utterance) take(a audioRef) {
	from := max(u.recv, a.start)
	to := a.end()
	if u.ended {
		to = min(to, u.end)
	}
	if to <= from {
		return
	}
	switch gap := from - u.recv; {
	case gap > audio.MaxGap:
		u.skipped += gap
	case gap > 0:
		// Missing audio (a dropped block, or history that does not reach back to the
		// pre-roll) becomes silence, so that the engine's word times stay stream times.
		u.audio = append(u.audio, make([]float32, gap)...)
	}
	u.audio = append(u.audio, a.samples[from-a.start:to-a.start]...)
	u.frames = append(u.frames, frameSpan{id: a.id, start: a.start, end: a.end()})
	u.recv = to
}

// index returns where stream position pos is in u.audio, within its bounds.
func (u *utterance) index(pos int64) int {
	return int(min(max(pos-u.start-u.skipped, 0), int64(len(u.audio))))
}

// span returns the audio from stream position from to to, for a worker.
func (u *utterance) span(from, to int64) []float32 {
	i, j := u.index(from), u.index(to)
	return u.audio[i:j:j]
}

// cut drops the audio after stream position pos.
func (u *utterance) cut(pos int64) {
	if u.recv <= pos {
		return
	}
	// Capped, so that an append after the cut copies instead of overwriting samples a
	// worker may still read.
	n := u.index(pos)
	u.audio = u.audio[:n:n]
	u.recv = pos
	u.fed = min(u.fed, pos)
}

func (u *utterance) complete(inputDone bool) bool {
	return u.ended && (u.recv >= u.end || inputDone)
}

func (r *runner) update(ctx context.Context, up iu.Update) error {
	switch pl := up.IU.Payload.(type) {
	case linearAudio:
		if up.Type == iu.Add && r.m.cfg.DecodeLinear {
			r.nextLinear = pl.LinearAudio()
		}
	case audio.Frame:
		if up.Type == iu.Add {
			if r.nextLinear.SameStretch(pl) {
				pl.Samples = r.nextLinear.Samples
			}
			r.nextLinear = audio.Frame{}
			return r.frame(up.IU.ID, pl)
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			r.segmentStart(up.IU.ID, pl)
		case iu.Commit:
			r.segmentEnd(up.IU.ID, pl)
		}
	case vad.Pause:
		if r.m.cfg.SpeculateAtPause && len(up.IU.GroundedIn) > 0 {
			switch up.Type {
			case iu.Add, iu.UpdatePayload:
				r.segmentPause(up.IU.GroundedIn[0], pl)
			case iu.Revoke:
				r.segmentResume(up.IU.GroundedIn[0])
			}
		}
	case vad.EndOfTurn:
		if up.Type == iu.Add {
			r.endOfTurn(pl)
		}
	case vad.EndOfStream:
		// No audio or segment will come; the utterance in progress waits only for its
		// end of turn. (The recogniser and the end-of-turn policy read each other, so
		// neither would otherwise see its input end.)
		if up.Type == iu.Add {
			r.speechEnded = true
		}
	}
	return nil // frame commits carry nothing new for the ASR
}

// linearAudio is an echo canceller's linear output (aec.Linear).
type linearAudio interface {
	LinearAudio() audio.Frame
}

func (r *runner) frame(id iu.ID, f audio.Frame) error {
	if f.Rate != audio.PipelineRate || f.Channels != 1 {
		return fmt.Errorf("asr: audio %s: want %d Hz mono", f.Summary(), audio.PipelineRate)
	}
	a := audioRef{id: id, start: f.Start, samples: f.Samples}
	r.recent = append(r.recent, a)
	for len(r.recent) > 1 && r.recent[0].end() <= a.end()-r.history {
		r.recent[0] = audioRef{}
		r.recent = r.recent[1:]
	}
	for _, u := range r.queue {
		if !u.ended || u.recv < u.end {
			u.take(a)
		}
	}
	return nil
}

func samplesOf(d time.Duration) int64 { return audio.DurationToSamples(d, audio.PipelineRate) }
func durOf(n int64) time.Duration     { return audio.SamplesToDuration(n, audio.PipelineRate) }

// segmentStart starts an utterance at a segment's onset, or continues the turn's
// utterance: then the user spoke again before the end of turn, and a speculative final
// decode of the audio so far is of no use any more.
func (r *runner) segmentStart(id iu.ID, seg vad.Segment) {
	if u := r.cur; u != nil {
		u.seg, u.paused = id, false
		r.dropFinal(u, "speech resumed")
		return
	}
	start := max(samplesOf(seg.Start)-r.preRoll, 0)
	if len(r.recent) > 0 {
		start = max(start, r.recent[0].start)
	}
	start = max(start, r.decodedTo)
	r.nextID++
	u := &utterance{
		id: r.nextID, start: start, recv: start, fed: start,
		agree:       NewLocalAgreement(r.m.cfg.Agreement),
		speechStart: -1, speechEnd: -1,
		seg: id, segEnd: -1,
		overAgent: seg.Overlap,
	}
	for _, a := range r.recent {
		u.take(a)
	}
	r.cur = u
	r.queue = append(r.queue, u)
}

// segmentEnd notes where the turn's speech ended so far. A speculation started at the
// segment's pause stands if the segment ended where the pause said.
func (r *runner) segmentEnd(id iu.ID, seg vad.Segment) {
	if u := r.cur; u != nil && u.seg == id {
		u.seg, u.paused = "", false
		u.segEnd = samplesOf(seg.End)
		if f := u.fin; f != nil && f.end != r.speculationEnd(u) {
			r.dropFinal(u, "the segment ended elsewhere than its pause")
		}
	}
}

// segmentPause: the open segment's speech paused; it will end at p.End unless it
// resumes. A tentative pause is too often followed by more speech for a final pass.
func (r *runner) segmentPause(seg iu.ID, p vad.Pause) {
	if u := r.cur; u != nil && u.seg == seg {
		u.paused, u.sure = true, !p.Tentative
		u.segEnd = samplesOf(p.End)
		if u.fin == nil {
			u.overAgent = u.overAgent && p.Overlap
		}
	}
}

// segmentResume: the paused segment's speech went on; a speculation on its pause is void.
func (r *runner) segmentResume(seg iu.ID) {
	if u := r.cur; u != nil && u.seg == seg && u.paused {
		u.paused = false
		r.dropFinal(u, "speech resumed")
	}
}

// endOfTurn ends the turn's utterance; its final decode follows once its audio is in.
func (r *runner) endOfTurn(e vad.EndOfTurn) {
	u := r.cur
	if u == nil {
		return
	}
	r.cur = nil
	u.ended = true
	u.eotAt = r.p.Now()
	u.speechStart, u.speechEnd = samplesOf(e.SpeechStart), samplesOf(e.SpeechEnd)
	if r.decodesEnd() {
		// Trailing after the speech: what the partial decodes were fed does not matter
		// to FinalOf, and a peek covers the same end (and what was fed after it), so a
		// speculation started at the end of the turn's last segment decodes the same
		// audio as a final decode started now.
		r.setEnd(u, max(u.speechEnd+r.trailingOf(u), u.start))
	} else {
		// Final decodes everything fed, so the audio fed for partial hypotheses is not
		// taken back.
		u.end = max(u.speechEnd+r.trailing, u.fed, u.start)
		u.cut(u.end)
	}
	r.decodedTo = max(u.end, u.recv)
	if j := r.running; j != nil && j.u == u && j.kind == jobPartial {
		// A partial of this utterance is running: the final decode matters more.
		r.cancel()
	}
}

// decodesEnd reports whether the engine decodes an utterance's end itself, by FinalOf
// or by a peek, rather than with Final after everything was fed.
func (r *runner) decodesEnd() bool { return r.finalOf != nil || r.peeker != nil }

// setEnd fixes the end of the audio an utterance's final decode covers. A decode of
// different audio (a speculation the end of turn did not confirm) is dropped. Audio fed
// to the streaming pass stays: a peek cannot take it back.
func (r *runner) setEnd(u *utterance, end int64) {
	u.end = end
	u.cut(max(end, u.fed))
	if u.fin != nil && u.fin.end != end {
		r.dropFinal(u, "the end of turn moved the end of the audio")
	}
}

// dropFinal abandons the utterance's FinalOf decode: its job is cancelled if it still
// runs, and its result will be ignored.
func (r *runner) dropFinal(u *utterance, why string) {
	f := u.fin
	if f == nil {
		return
	}
	u.fin = nil
	running := r.running != nil && r.running.seq == f.seq
	if running {
		r.cancel()
	}
	r.log.Debug("speculative final dropped", zap.Int("utterance", u.id), zap.String("why", why),
		zap.Bool("running", running), zap.Duration("audio_end", durOf(f.end)))
}

func (r *runner) endInput() {
	r.inputDone = true
	if u := r.cur; u != nil {
		r.cur = nil
		u.ended = true
		u.eotAt = r.p.Now()
		if r.decodesEnd() {
			r.setEnd(u, u.recv)
		} else {
			u.end = u.recv
		}
		r.decodedTo = u.end
	}
}

// jobKind says what a job asks of the engine.
type jobKind uint8

const (
	// jobPartial feeds new audio to the streaming pass and asks for a hypothesis.
	jobPartial jobKind = iota + 1
	// jobFinal feeds the rest of the audio and ends the utterance with Final (engines
	// that are neither FinalDecoder nor Peeker).
	jobFinal
	// jobEnd decodes the utterance's final up to a given end: a Peeker whose final of
	// the utterance is its own is fed up to there and peeks, otherwise FinalOf decodes
	// the audio from the utterance's start.
	jobEnd
)

// job is one round of engine calls for the utterance at the head of the queue.
type job struct {
	seq   int
	kind  jobKind
	u     *utterance
	start bool      // call Start first (jobPartial, jobFinal, jobEnd when it may peek)
	feed  []float32 // to Feed (jobPartial, jobFinal, jobEnd when it peeks)
	from  int64     // the stream position of feed[0] (jobPartial, jobEnd)
	// origin is the stream position the utterance begins at, for a Positioned engine.
	origin int64
	// whole is the utterance's audio to its end, for FinalOf (jobEnd); peek says the
	// job asks the Peeker first.
	whole []float32
	peek  bool
}

type jobResult struct {
	job
	hyp     Hypothesis
	started bool     // Start was called and succeeded
	fed     int      // how much of feed was fed
	own     ownFinal // what the Peeker said of the utterance's final after Start
	err     error
}

// feedPiece is how much audio a partial job feeds at once: between pieces it sees that
// it was cancelled, so that a final decode waits at most for one piece. (pocketsphinx
// does not interrupt a Feed.)
const feedPiece = audio.PipelineRate / 10

// advance commits the utterances whose final hypothesis is ready and starts the next
// engine job.
func (r *runner) advance(ctx context.Context) error {
	for len(r.queue) > 0 {
		u := r.queue[0]
		if !u.ended || u.fin == nil || !u.fin.done {
			break
		}
		if err := r.commit(ctx, u, u.fin); err != nil {
			return err
		}
	}
	r.schedule(ctx)
	return nil
}

// speculation returns the end of the audio a speculative final decode of u would cover
// now, and whether one is due: the turn's last segment has ended, Trailing audio after
// it has arrived and no final decode of u is running or done.
func (r *runner) speculation(u *utterance) (end int64, due bool) {
	if !r.speculate || u != r.cur || u.seg != "" && !(u.paused && (u.sure || r.peekTentative(u))) || u.segEnd < 0 || u.fin != nil {
		return 0, false
	}
	end = r.speculationEnd(u)
	return end, u.recv >= end
}

// feedEnd is how far the streaming pass may be fed now. When its final may be its own
// (a Peeker), the silence after the speech stops at Trailing after it: a peek covers
// just that, as it would at the end of turn, whenever and however often partials ran,
// and the streaming pass adapts to the same audio either way.
func (r *runner) feedEnd(u *utterance) int64 {
	if r.peeker == nil || u.seg != "" && !u.paused || u.segEnd < 0 {
		return u.recv
	}
	return max(min(u.recv, r.speculationEnd(u)), u.fed)
}

// speculationEnd is the end of the audio a speculative final decode of u covers.
func (r *runner) speculationEnd(u *utterance) int64 { return max(u.segEnd+r.trailingOf(u), u.start) }

// peekTentative reports whether u's final may be decoded at a tentative pause already:
// a peek costs little, and speech that resumes after it only has the streaming pass
// decode the utterance again.
func (r *runner) peekTentative(u *utterance) bool { return r.peeks(u) && u.own == ownYes }

// peeks reports whether u's final will be a peek at the engine's streaming pass.
func (r *runner) peeks(u *utterance) bool {
	return r.peeker != nil && u.own != ownNo && !(u.overAgent && r.finalOf != nil)
}

// trailingOf is how much audio after the speech u's final covers.
func (r *runner) trailingOf(u *utterance) int64 {
	if pt := r.m.cfg.PeekTrailing; pt > 0 && r.peeks(u) && u.own == ownYes {
		return samplesOf(pt)
	}
	return r.trailing
}

// schedule starts the next engine job when none runs and one is due.
func (r *runner) schedule(ctx context.Context) {
	if len(r.queue) == 0 {
		return
	}
	u := r.queue[0]
	if j := r.running; j != nil {
		if _, due := r.speculation(u); due && j.u == u && j.kind == jobPartial {
			// The speculation is what the end of the turn will wait for; the partial
			// in its way is only about the silence after the speech.
			r.cancel()
		}
		return
	}
	j := job{seq: r.jobs + 1, u: u, origin: u.start}
	if u.complete(r.inputDone || r.speechEnded) {
		if u.recv < u.end {
			// The input ended before all the audio came.
			if r.decodesEnd() {
				r.setEnd(u, u.recv)
			} else {
				u.end = u.recv
			}
		}
	}
	switch specEnd, specDue := r.speculation(u); {
	case u.complete(r.inputDone || r.speechEnded) && !r.decodesEnd():
		j.kind, j.start, j.feed = jobFinal, !u.started, u.span(u.fed, u.recv)
		u.fed, u.started = u.recv, true
	case u.complete(r.inputDone || r.speechEnded):
		if u.fin != nil {
			return // done, and committed by advance
		}
		r.endJob(&j, u, u.end)
		u.fin = &finalDecode{seq: j.seq, end: u.end, started: r.p.Now()}
	case specDue:
		r.endJob(&j, u, specEnd)
		u.fin = &finalDecode{seq: j.seq, end: specEnd, speculative: true, started: r.p.Now()}
		r.log.Debug("speculative final started", zap.Int("utterance", u.id), zap.Duration("audio_end", durOf(specEnd)), zap.Bool("peek", j.peek))
	case u.fin != nil, u.ended && r.decodesEnd():
		// Nothing new to hear until speech resumes (which drops the speculation), and
		// nothing to feed after the end of turn when the final decode is FinalOf.
		return
	case r.feedEnd(u)-u.fed >= r.hop:
		to := r.feedEnd(u)
		j.kind, j.start, j.feed, j.from = jobPartial, !u.started, u.span(u.fed, to), u.fed
		u.fed, u.started = to, true
	default:
		return
	}
	r.jobs = j.seq
	jctx, cancel := context.WithCancel(ctx)
	r.running, r.cancel = &j, cancel
	eng, fd, pk := r.m.engine, r.finalOf, r.peeker
	r.p.Go(func() {
		res := runJob(jctx, eng, fd, pk, j)
		// The module may have stopped waiting; then nobody needs the result.
		_ = r.p.Post(ctx, res)
	})
}

// endJob makes j the final decode of u up to end: a peek when the engine may give its
// own final of u, FinalOf of u's audio otherwise.
func (r *runner) endJob(j *job, u *utterance, end int64) {
	j.kind = jobEnd
	if r.finalOf != nil {
		j.whole = u.span(u.start, end)
	}
	if r.peeks(u) {
		j.peek, j.start, j.from = true, !u.started, u.fed
		if u.fed < end {
			j.feed = u.span(u.fed, end)
		}
	}
}

// runJob runs on the worker, which owns the engine until it posts the result.
func runJob(ctx context.Context, eng Engine, fd FinalDecoder, pk Peeker, j job) (res jobResult) {
	res.job = j
	if p, ok := eng.(Positioned); ok {
		p.StreamAt(j.origin)
	}
	if j.start {
		if res.err = eng.Start(ctx); res.err != nil {
			res.err = fmt.Errorf("start: %w", res.err)
			return res
		}
		res.started = true
		if pk != nil {
			res.own = ownNo
			if pk.OwnFinal() {
				res.own = ownYes
			}
		}
	}
	switch {
	case j.kind == jobEnd && j.peek && pk.OwnFinal():
		if res.err = feedPieces(ctx, eng, j.feed, &res.fed); res.err != nil {
			return res
		}
		if res.hyp, res.err = pk.PeekFinal(ctx); res.err != nil {
			res.err = fmt.Errorf("final decode: %w", res.err)
		}
		res.own = ownYes
		return res
	case j.kind == jobEnd:
		if pk != nil {
			res.own = ownNo
		}
		if fd == nil {
			res.err = errors.New("final decode: the engine's final is neither its own nor FinalOf's")
			return res
		}
		if res.hyp, res.err = fd.FinalOf(ctx, j.whole); res.err != nil {
			res.err = fmt.Errorf("final decode: %w", res.err)
		}
		return res
	case j.kind == jobFinal:
		if res.err = eng.Feed(ctx, j.feed); res.err != nil {
			res.err = fmt.Errorf("feed: %w", res.err)
			return res
		}
		res.fed = len(j.feed)
		res.hyp, res.err = eng.Final(ctx)
		return res
	}
	if res.err = feedPieces(ctx, eng, j.feed, &res.fed); res.err != nil {
		return res
	}
	res.hyp, res.err = eng.Partial(ctx)
	return res
}

// feedPieces feeds samples in pieces, counting in fed what went in, and stops between
// pieces when ctx is cancelled.
func feedPieces(ctx context.Context, eng Engine, samples []float32, fed *int) error {
	for *fed < len(samples) {
		if err := ctx.Err(); err != nil {
			return err
		}
		piece := samples[*fed:min(*fed+feedPiece, len(samples))]
		if err := eng.Feed(ctx, piece); err != nil {
			return fmt.Errorf("feed: %w", err)
		}
		*fed += len(piece)
	}
	return nil
}

func (r *runner) cancelJob() {
	if r.cancel != nil {
		r.cancel()
	}
}

func (r *runner) result(ctx context.Context, res jobResult) error {
	r.running = nil
	r.cancel()
	u := res.u
	if res.own != ownUnknown {
		u.own = res.own
	}
	switch res.kind {
	case jobEnd:
		if res.start && res.started {
			u.started = true
		}
		if res.own == ownYes {
			// The streaming pass was fed for the peek, whatever became of it.
			u.fed = max(u.fed, res.from+int64(res.fed))
		}
		f := u.fin
		if f == nil || f.seq != res.seq {
			// A speculation dropped meanwhile: nobody needs its result.
			if res.err != nil && !errors.Is(res.err, context.Canceled) {
				r.log.Warn("dropped speculative final failed", zap.Int("utterance", u.id), zap.Error(res.err))
			}
			return nil
		}
		if res.err != nil {
			return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
		}
		f.done, f.hyp = true, res.hyp
		if f.speculative {
			r.log.Debug("speculative final done", zap.Int("utterance", u.id), zap.Bool("turn_ended", u.ended),
				zap.Duration("took", r.p.Now().Sub(f.started)))
			if r.m.cfg.EarlyFinal && !u.ended {
				// Its words are what the turn will most likely end with: say so now.
				target := make([]Word, len(f.hyp.Words))
				for i, w := range f.hyp.Words {
					target[i] = r.word(u, w, 1)
				}
				return r.reconcile(ctx, u, target, false)
			}
		}
		return nil // advance commits it once the end of turn confirmed it
	case jobFinal:
		if res.err != nil {
			return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
		}
		return r.commit(ctx, u, &finalDecode{done: true, hyp: res.hyp, started: u.eotAt})
	}
	if res.start && !res.started {
		u.started = false
	}
	if res.fed < len(res.feed) {
		// Cancelled between pieces: the rest goes with the next job.
		u.fed = min(res.from+int64(res.fed), u.recv)
	}
	if res.err != nil {
		if errors.Is(res.err, context.Canceled) && ctx.Err() == nil {
			return nil // a partial made obsolete by the end of turn or a speculation
		}
		return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
	}
	stable, rest, restStab := u.agree.Update(res.hyp.Words)
	target := make([]Word, 0, len(stable)+len(rest))
	for _, w := range stable {
		target = append(target, r.word(u, w, 1))
	}
	if r.m.cfg.EmitUnstable {
		for i, w := range rest {
			target = append(target, r.word(u, w, restStab[i]))
		}
	}
	return r.reconcile(ctx, u, target, false)
}

// commit sends the final words and the Utterance of u, the head of the queue.
func (r *runner) commit(ctx context.Context, u *utterance, f *finalDecode) error {
	r.queue[0] = nil
	r.queue = r.queue[1:]
	now := r.p.Now()
	r.log.Debug("utterance committed", zap.Int("utterance", u.id), zap.Bool("speculative", f.speculative),
		zap.Duration("end_of_turn_to_commit", now.Sub(u.eotAt)),
		zap.Duration("decode_started_before_end_of_turn", u.eotAt.Sub(f.started)))
	target := make([]Word, len(f.hyp.Words))
	for i, w := range f.hyp.Words {
		target[i] = r.word(u, w, 1)
	}
	return r.reconcile(ctx, u, target, true)
}

func (r *runner) word(u *utterance, w HypWord, stability float32) Word {
	base := durOf(u.start)
	return Word{
		Text:       w.Text,
		Start:      base + w.Start,
		End:        base + w.End,
		Stability:  stability,
		Confidence: w.Confidence,
		Utterance:  u.id,
	}
}

// reconcile makes the utterance's word IUs say target: words after the first difference
// are revoked and the rest of target added; kept words are updated when their stability
// changed. A final reconcile commits every word and adds the Utterance.
func (r *runner) reconcile(ctx context.Context, u *utterance, target []Word, final bool) error {
	k := 0
	for k < len(u.words) && k < len(target) && SameWord(u.words[k].word.Text, target[k].Text) {
		k++
	}
	if k < len(u.words) {
		// Revoked words go out first, in their own batch: new words must chain after the
		// last surviving one, which the runtime knows only once the revocations applied.
		var revokes []iu.Update
		for i := len(u.words) - 1; i >= k; i-- {
			revokes = append(revokes, iu.RevokeOf(u.words[i].u))
		}
		u.words = u.words[:k]
		if err := r.p.Send(ctx, revokes...); err != nil {
			return fmt.Errorf("asr: %w", err)
		}
	}
	var ups []iu.Update
	for i := range u.words {
		e := &u.words[i]
		if final && e.word != target[i] || !final && e.word.Stability != target[i].Stability {
			e.word = target[i]
			ups = append(ups, iu.UpdateOf(e.u, e.word))
			e.u.Payload = e.word
		}
	}
	for _, w := range target[k:] {
		nu := r.p.NewIU(w, u.grounding(samplesOf(w.Start), samplesOf(w.End))...)
		u.words = append(u.words, emitted{u: nu, word: w})
		ups = append(ups, iu.AddOf(nu))
	}
	if final {
		utt := Utterance{
			ID:         u.id,
			Words:      make([]Word, len(u.words)),
			AudioStart: durOf(u.start),
			AudioEnd:   durOf(u.end),
			Start:      durOf(u.start),
			End:        durOf(u.end),
		}
		if u.speechStart >= 0 {
			utt.Start, utt.End = durOf(u.speechStart), durOf(u.speechEnd)
		}
		ids := make([]iu.ID, len(u.words))
		hw := make([]HypWord, len(u.words))
		for i, e := range u.words {
			ups = append(ups, iu.CommitOf(e.u))
			utt.Words[i] = e.word
			ids[i] = e.u.ID
			hw[i] = HypWord{Text: e.word.Text}
		}
		utt.Text = JoinWords(hw)
		uu := r.p.NewIU(utt, ids...)
		ups = append(ups, iu.AddOf(uu), iu.CommitOf(uu))
	}
	if err := r.p.Send(ctx, ups...); err != nil {
		return fmt.Errorf("asr: %w", err)
	}
	return nil
}

// grounding returns the audio IUs overlapping [start, end) (at least the nearest one).
func (u *utterance) grounding(start, end int64) []iu.ID {
	if end <= start {
		end = start + 1
	}
	var ids []iu.ID
	for _, f := range u.frames {
		if f.end > start && f.start < end {
			ids = append(ids, f.id)
		}
	}
	if len(ids) == 0 && len(u.frames) > 0 {
		// Engines may place a word slightly past the audio they were given.
		ids = append(ids, u.frames[len(u.frames)-1].id)
	}
	return ids
}
