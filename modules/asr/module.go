package asr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/vad"
)

// Config configures the ASR module and its engine.
type Config struct {
	// Engine names the recogniser: "pocketsphinx" or "whisper".
	Engine string `yaml:"engine"`
	// Hop is how much new audio triggers the next partial hypothesis. Decodes never
	// overlap: audio that arrives during one waits for the next.
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
	// includes at least. (Audio already fed for partial hypotheses, up to where the end
	// of turn came, is never taken back.)
	Trailing time.Duration `yaml:"trailing"`
	// History is how much recent audio is kept for the pre-roll of the next utterance;
	// it must cover the VAD's onset confirmation delay plus padding and PreRoll.
	History time.Duration `yaml:"history"`

	Whisper      WhisperConfig      `yaml:"whisper"`
	Pocketsphinx PocketsphinxConfig `yaml:"pocketsphinx"`
}

// DefaultConfig returns the defaults: pocketsphinx (the engine that works without
// downloads), a 300 ms hop and LocalAgreement-2.
func DefaultConfig() Config {
	return Config{
		Engine:       "pocketsphinx",
		Hop:          300 * time.Millisecond,
		Agreement:    2,
		PreRoll:      200 * time.Millisecond,
		Trailing:     300 * time.Millisecond,
		History:      3 * time.Second,
		Whisper:      DefaultWhisperConfig(),
		Pocketsphinx: DefaultPocketsphinxConfig(),
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Hop <= 0:
		return fmt.Errorf("asr: hop %v must be positive", c.Hop)
	case c.Agreement < 1:
		return fmt.Errorf("asr: agreement %d must be at least 1", c.Agreement)
	case c.PreRoll < 0 || c.Trailing < 0:
		return errors.New("asr: pre_roll and trailing must not be negative")
	case c.History < c.PreRoll+time.Second:
		return fmt.Errorf("asr: history %v must exceed pre_roll by at least the VAD's onset delay (1 s)", c.History)
	}
	return nil
}

// Module is the ASR module. It consumes audio.Frame IUs (16 kHz mono) and vad.Segment
// and vad.EndOfTurn IUs: a segment's onset starts an utterance (with pre-roll audio) or
// continues the current one, the end of turn triggers the final decode. It produces Word
// and Utterance IUs.
type Module struct {
	name   string
	cfg    Config
	engine Engine
	closer io.Closer
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

// Open creates the engine cfg.Engine names and returns a module that owns it; Close it
// after the network ran.
func Open(name string, cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e, err := OpenEngine(cfg)
	if err != nil {
		return nil, err
	}
	m, err := New(name, cfg, e)
	if err != nil {
		e.Close()
		return nil, err
	}
	m.closer = e
	return m, nil
}

// Close frees the engine created by Open. Call it after Run returned.
func (m *Module) Close() error {
	if m.closer == nil {
		return nil
	}
	err := m.closer.Close()
	m.closer = nil
	return err
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	r := &runner{
		m: m, p: p,
		hop:      audio.DurationToSamples(m.cfg.Hop, audio.PipelineRate),
		preRoll:  audio.DurationToSamples(m.cfg.PreRoll, audio.PipelineRate),
		trailing: audio.DurationToSamples(m.cfg.Trailing, audio.PipelineRate),
		history:  audio.DurationToSamples(m.cfg.History, audio.PipelineRate),
	}
	defer r.cancelJob()
	for {
		if r.inputDone && !r.inFlight && len(r.queue) == 0 {
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
		r.schedule(ctx)
	}
}

// runner is the state of one Run, owned by the module's goroutine. Engine calls happen on
// one worker at a time; while a job runs, the engine belongs to the worker.
type runner struct {
	m                               *Module
	p                               *iu.Ports
	hop, preRoll, trailing, history int64

	// recent holds the latest audio, for the pre-roll of the next utterance.
	recent []audioRef
	// decodedTo is the end of the last ended utterance: the next one starts no earlier,
	// so that no audio is decoded twice.
	decodedTo int64

	cur    *utterance   // the utterance of the turn in progress, if any
	queue  []*utterance // utterances not finished; the engine works on queue[0]
	nextID int

	inFlight  bool
	cancel    context.CancelFunc // cancels the job in flight
	inputDone bool
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
	end   int64 // stream position after the last sample to decode (once ended)
	ended bool

	buf     []float32 // received and not yet fed to the engine
	frames  []frameSpan
	started bool

	agree *LocalAgreement
	words []emitted

	speechStart, speechEnd int64 // from the end of turn; -1 when unknown
}

// maxGap is the longest stretch of missing audio an utterance fills with silence.
const maxGap = 5 * audio.PipelineRate

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
	if gap := from - u.recv; gap > 0 && gap <= maxGap {
		// Missing audio (a dropped block, or history that does not reach back to the
		// pre-roll) becomes silence, so that the engine's word times stay stream times.
		u.buf = append(u.buf, make([]float32, gap)...)
	}
	u.buf = append(u.buf, a.samples[from-a.start:to-a.start]...)
	u.frames = append(u.frames, frameSpan{id: a.id, start: a.start, end: a.end()})
	u.recv = to
}

func (u *utterance) complete(inputDone bool) bool {
	return u.ended && (u.recv >= u.end || inputDone)
}

func (r *runner) update(ctx context.Context, up iu.Update) error {
	if up.Type != iu.Add {
		return nil // segment commits and frame commits carry nothing new for the ASR
	}
	switch pl := up.IU.Payload.(type) {
	case audio.Frame:
		return r.frame(up.IU.ID, pl)
	case vad.Segment:
		r.onset(pl)
	case vad.EndOfTurn:
		r.endOfTurn(pl)
	}
	return nil
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

// onset starts an utterance at a segment's onset, unless the turn's utterance runs.
func (r *runner) onset(seg vad.Segment) {
	if r.cur != nil {
		return
	}
	start := max(samplesOf(seg.Start)-r.preRoll, 0)
	if len(r.recent) > 0 {
		start = max(start, r.recent[0].start)
	}
	start = max(start, r.decodedTo)
	r.nextID++
	u := &utterance{
		id: r.nextID, start: start, recv: start,
		agree:       NewLocalAgreement(r.m.cfg.Agreement),
		speechStart: -1, speechEnd: -1,
	}
	for _, a := range r.recent {
		u.take(a)
	}
	r.cur = u
	r.queue = append(r.queue, u)
}

// endOfTurn ends the turn's utterance; its final decode follows once its audio is in.
func (r *runner) endOfTurn(e vad.EndOfTurn) {
	u := r.cur
	if u == nil {
		return
	}
	r.cur = nil
	u.ended = true
	u.speechStart, u.speechEnd = samplesOf(e.SpeechStart), samplesOf(e.SpeechEnd)
	fed := u.recv - int64(len(u.buf))
	u.end = max(u.speechEnd+r.trailing, fed, u.start)
	if u.recv > u.end {
		u.buf = u.buf[:len(u.buf)-int(u.recv-u.end)]
		u.recv = u.end
	}
	r.decodedTo = u.end
	if r.inFlight && r.queue[0] == u {
		// A partial of this utterance is running: the final decode matters more.
		r.cancel()
	}
}

func (r *runner) endInput() {
	r.inputDone = true
	if u := r.cur; u != nil {
		r.cur = nil
		u.ended = true
		u.end = u.recv
		r.decodedTo = u.end
	}
}

// job is one round of engine calls for the utterance at the head of the queue.
type job struct {
	u     *utterance
	start bool
	feed  []float32
	final bool
}

type jobResult struct {
	job
	hyp Hypothesis
	err error
}

// schedule starts the next engine job when none runs and one is due.
func (r *runner) schedule(ctx context.Context) {
	if r.inFlight || len(r.queue) == 0 {
		return
	}
	u := r.queue[0]
	j := job{u: u, start: !u.started}
	switch {
	case u.complete(r.inputDone):
		j.final = true
	case int64(len(u.buf)) >= r.hop:
	default:
		return
	}
	j.feed, u.buf = u.buf, nil
	u.started = true
	jctx, cancel := context.WithCancel(ctx)
	r.inFlight, r.cancel = true, cancel
	eng := r.m.engine
	r.p.Go(func() {
		res := jobResult{job: j}
		res.err = runJob(jctx, eng, j, &res.hyp)
		// The module may have stopped waiting; then nobody needs the result.
		_ = r.p.Post(ctx, res)
	})
}

// runJob runs on the worker, which owns the engine until it posts the result.
func runJob(ctx context.Context, eng Engine, j job, hyp *Hypothesis) error {
	if j.start {
		if err := eng.Start(ctx); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	}
	if len(j.feed) > 0 {
		if err := eng.Feed(ctx, j.feed); err != nil {
			return fmt.Errorf("feed: %w", err)
		}
	}
	var err error
	if j.final {
		*hyp, err = eng.Final(ctx)
	} else {
		*hyp, err = eng.Partial(ctx)
	}
	return err
}

func (r *runner) cancelJob() {
	if r.cancel != nil {
		r.cancel()
	}
}

func (r *runner) result(ctx context.Context, res jobResult) error {
	r.inFlight = false
	r.cancel()
	u := res.u
	if res.err != nil {
		if !res.final && errors.Is(res.err, context.Canceled) && ctx.Err() == nil {
			return nil // a partial made obsolete by the end of turn
		}
		return fmt.Errorf("asr: utterance %d: %w", u.id, res.err)
	}
	if !res.final {
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
	target := make([]Word, len(res.hyp.Words))
	for i, w := range res.hyp.Words {
		target[i] = r.word(u, w, 1)
	}
	r.queue[0] = nil
	r.queue = r.queue[1:]
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
