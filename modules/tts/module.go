package tts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/tts/normalize"
	"go.uber.org/zap"
)

// Module is the TTS network module. It reads committed Clause IUs (and Text IUs) and
// control commands, and sends Chunk IUs (kind "speech"), each ADDed and COMMITted in one
// batch and grounded in its clause.
//
// A prepared clause (one that says so through IsPrepared, before its commit: the reply
// was prepared while the user's turn may not be over) is synthesised at once, and its
// chunks are ADDed tentatively (Chunk.Tentative; the speaker holds them). The clause's
// commit commits them, its revoke revokes them: nobody hears a withdrawn reply.
//
// Clauses are spoken one at a time in the order they were committed; each is synthesised
// on a worker as soon as the one before it is done, so the first chunk of a clause never
// waits for later clauses. A clause revoked before its synthesis started is never
// spoken. control.Interrupt for a turn stops the synthesis in progress for it, drops its
// queued clauses and ignores any that arrive later; Pause and Resume are the speaker's.
type Module struct {
	name   string
	cfg    Config
	engine Engine
}

// New returns a module that speaks with engine.
func New(name string, cfg Config, engine Engine) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if engine == nil {
		return nil, errors.New("tts: no engine")
	}
	if engine.SampleRate() <= 0 {
		return nil, fmt.Errorf("tts: engine sample rate %d", engine.SampleRate())
	}
	if name == "" {
		name = "tts"
	}
	return &Module{name: name, cfg: cfg, engine: engine}, nil
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// job is one clause to speak.
type job struct {
	id       uint64
	clauseIU iu.ID
	turn     int
	clause   int
	text     string
	last     bool
	queued   time.Time // when its commit arrived, for the first-chunk latency

	cancel    context.CancelFunc // set when started
	cancelled bool
	sent      int // chunks sent

	// tentative: the clause is prepared, not committed; its chunks so far wait in
	// held for the commit or revoke.
	tentative bool
	held      []iu.IU
}

// preparer is implemented by clauses that may be spoken tentatively before their commit
// (llm.Clause).
type preparer interface{ IsPrepared() bool }

// Messages from the synthesis worker to the module goroutine.
type (
	chunksReady struct {
		job    uint64
		chunks []Chunk
	}
	jobDone struct {
		job uint64
		err error
	}
)

// runner is the module goroutine's state; only that goroutine touches it.
type runner struct {
	m   *Module
	p   *iu.Ports
	log *zap.Logger

	queue       []*job
	current     *job
	nextID      uint64
	interrupted map[int]bool // turns interrupted; their clauses are not spoken
	inputDone   bool
	// prepared holds the jobs of prepared clauses until their commit or revoke, by
	// clause IU.
	prepared map[iu.ID]*job
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	r := &runner{m: m, p: p, log: p.Logger(), interrupted: make(map[int]bool), prepared: make(map[iu.ID]*job)}
	defer func() {
		if r.current != nil {
			r.current.cancel()
		}
	}()
	for {
		r.start(ctx)
		if r.inputDone && r.current == nil && len(r.queue) == 0 {
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
			if err := r.local(ctx, ev.Local); err != nil {
				return err
			}
		case iu.EventInputDone:
			r.inputDone = true
		}
	}
}

func (r *runner) update(ctx context.Context, up iu.Update) error {
	switch pl := up.IU.Payload.(type) {
	case control.Command:
		// Interrupt is idempotent, so acting on both its ADD and its COMMIT is safe.
		if pl.Action == control.Interrupt && (up.Type == iu.Add || up.Type == iu.Commit) {
			r.interrupt(pl.TurnID, pl.Reason)
		}
	case Clause:
		switch up.Type {
		case iu.Add, iu.UpdatePayload:
			if p, ok := pl.(preparer); ok && p.IsPrepared() && r.prepared[up.IU.ID] == nil {
				r.prepared[up.IU.ID] = r.enqueue(up.IU.ID, pl, true)
			}
		case iu.Commit:
			if j := r.prepared[up.IU.ID]; j != nil {
				return r.confirm(ctx, j)
			}
			r.enqueue(up.IU.ID, pl, false)
		case iu.Revoke:
			if j := r.prepared[up.IU.ID]; j != nil {
				return r.withdraw(ctx, j)
			}
			r.revoke(up.IU.ID)
		}
	}
	return nil
}

// enqueue queues a clause to speak (nil when its turn was interrupted).
func (r *runner) enqueue(id iu.ID, c Clause, tentative bool) *job {
	turn, clause, text, last := c.ClauseText()
	if r.interrupted[turn] {
		r.log.Debug("clause of an interrupted turn dropped", zap.Int("turn", turn), zap.Int("clause", clause))
		return nil
	}
	r.nextID++
	j := &job{id: r.nextID, clauseIU: id, turn: turn, clause: clause, text: text, last: last, queued: r.p.Now(), tentative: tentative}
	r.queue = append(r.queue, j)
	return j
}

// confirm commits a prepared clause's chunks; the rest of them follow committed.
func (r *runner) confirm(ctx context.Context, j *job) error {
	delete(r.prepared, j.clauseIU)
	j.tentative = false
	ups := make([]iu.Update, 0, len(j.held))
	for _, u := range j.held {
		ups = append(ups, iu.CommitOf(u))
	}
	j.held = nil
	return r.p.Send(ctx, ups...)
}

// withdraw drops a prepared clause: its synthesis stops and its chunks are revoked.
func (r *runner) withdraw(ctx context.Context, j *job) error {
	delete(r.prepared, j.clauseIU)
	for i, q := range r.queue {
		if q == j {
			r.queue = append(r.queue[:i], r.queue[i+1:]...)
			break
		}
	}
	if r.current == j && !j.cancelled {
		j.cancelled = true
		j.cancel()
	}
	ups := make([]iu.Update, 0, len(j.held))
	for _, u := range j.held {
		ups = append(ups, iu.RevokeOf(u))
	}
	j.held = nil
	return r.p.Send(ctx, ups...)
}

// revoke drops a clause that has not been spoken. The IU rules make a committed clause
// final, so this only matters for producers that queue differently; it is cheap to honour.
func (r *runner) revoke(id iu.ID) {
	for i, j := range r.queue {
		if j.clauseIU == id {
			r.queue = append(r.queue[:i], r.queue[i+1:]...)
			return
		}
	}
	if c := r.current; c != nil && c.clauseIU == id && !c.cancelled {
		c.cancelled = true
		c.cancel()
	}
}

func (r *runner) interrupt(turn int, reason string) {
	r.interrupted[turn] = true
	kept := r.queue[:0]
	dropped := 0
	for _, j := range r.queue {
		if j.turn == turn {
			dropped++
			continue
		}
		kept = append(kept, j)
	}
	clear(r.queue[len(kept):])
	r.queue = kept
	stopped := false
	if c := r.current; c != nil && c.turn == turn && !c.cancelled {
		c.cancelled = true
		c.cancel()
		stopped = true
	}
	r.log.Debug("interrupt", zap.Int("turn", turn), zap.String("reason", reason),
		zap.Bool("stopped_synthesis", stopped), zap.Int("dropped_clauses", dropped))
}

// start begins the next queued clause when nothing is being synthesised.
func (r *runner) start(ctx context.Context) {
	if r.current != nil || len(r.queue) == 0 {
		return
	}
	j := r.queue[0]
	r.queue[0] = nil
	r.queue = r.queue[1:]
	jctx, cancel := context.WithCancel(ctx)
	j.cancel = cancel
	r.current = j
	id, turn, clause, text, last := j.id, j.turn, j.clause, j.text, j.last
	r.p.Go(func(w iu.Worker) {
		err := r.m.Synthesize(jctx, turn, clause, text, last, func(chunks []Chunk) error {
			return w.Post(jctx, chunksReady{job: id, chunks: chunks})
		})
		// The module learns that the worker is done even when the job was cancelled.
		_ = w.Post(ctx, jobDone{job: id, err: err})
	})
}

func (r *runner) local(ctx context.Context, v any) error {
	switch msg := v.(type) {
	case chunksReady:
		j := r.current
		if j == nil || j.id != msg.job || j.cancelled {
			return nil // a stopped synthesis: its audio is not wanted any more
		}
		for _, c := range msg.chunks {
			if j.tentative {
				c.Tentative = true
				u := r.p.NewIU(c, j.clauseIU)
				j.held = append(j.held, u)
				if err := r.p.Send(ctx, iu.AddOf(u)); err != nil {
					return err
				}
			} else {
				u := r.p.NewIU(c, j.clauseIU)
				if err := r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
					return err
				}
			}
			if j.sent == 0 {
				r.log.Debug("first chunk", zap.Int("turn", j.turn), zap.Int("clause", j.clause),
					zap.Duration("latency", r.p.Now().Sub(j.queued)))
			}
			j.sent++
		}
	case jobDone:
		j := r.current
		if j == nil || j.id != msg.job {
			return nil
		}
		j.cancel()
		r.current = nil
		switch {
		case msg.err == nil:
		case j.cancelled && errors.Is(msg.err, context.Canceled):
		case ctx.Err() != nil:
		default:
			// One clause that cannot be spoken should not end the conversation.
			r.log.Error("synthesis failed", zap.Int("turn", j.turn), zap.Int("clause", j.clause), zap.Error(msg.err))
		}
	}
	return nil
}

// Synthesize speaks clause clauseID of turn turnID (last: the turn's last clause) and
// hands its chunks to send, in order, piece by piece: what Run does on its workers,
// callable outside a network (benchmarks, tools). The last chunk is held back until the
// clause ends so that it can carry LastOfClause; a clause that yields no audio still
// sends one empty chunk with the flags set. It is safe to call from any goroutine; the
// engine is used by one call at a time.
func (m *Module) Synthesize(ctx context.Context, turnID, clauseID int, text string, last bool, send func([]Chunk) error) error {
	rate := m.engine.SampleRate()
	norm := normalize.Normalize(text)
	ws := newWords(norm)
	ch := newChunker(int(audio.DurationToSamples(m.cfg.ChunkDuration, rate)), int(audio.DurationToSamples(m.cfg.MinPause, rate)),
		int(audio.DurationToSamples(m.cfg.WordHold, rate)))
	var (
		held *Chunk
		seq  int
	)
	build := func(cuts []cut) []Chunk {
		out := make([]Chunk, 0, len(cuts)+1)
		for _, c := range cuts {
			next := Chunk{
				Audio:      audio.Frame{Samples: c.samples, Rate: rate, Channels: 1, Start: c.start},
				TurnID:     turnID,
				ClauseID:   clauseID,
				WordIndex:  c.label.word,
				CharStart:  c.label.start,
				CharEnd:    c.label.end,
				WordOffset: c.wordOffset,
				WordLength: c.wordLength,
				ClauseText: text,
				Seq:        seq,
			}
			next.FirstOfClause = seq == 0
			seq++
			if held != nil {
				out = append(out, *held)
			}
			held = &next
		}
		return out
	}
	var err error
	if hasSpeech(norm.Spoken) {
		err = m.engine.Synthesize(ctx, norm.Spoken, func(p Piece) error {
			var marks []labelMark
			for _, mk := range p.Marks {
				if lm, ok := ws.mark(mk); ok {
					marks = append(marks, lm)
				}
			}
			if out := build(ch.push(p.Samples, marks)); len(out) > 0 {
				return send(out)
			}
			return nil
		})
	}
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: nothing more of this clause is wanted
	}
	out := build(ch.finish(ws.lastEnd()))
	if held == nil {
		held = &Chunk{Audio: audio.Frame{Rate: rate, Channels: 1}, TurnID: turnID, ClauseID: clauseID,
			WordIndex: -1, ClauseText: text, FirstOfClause: true}
	}
	held.LastOfClause = true
	held.LastOfTurn = last
	out = append(out, *held)
	if sendErr := send(out); sendErr != nil && err == nil {
		err = sendErr
	}
	if err != nil {
		return fmt.Errorf("tts: turn %d clause %d: %w", turnID, clauseID, err)
	}
	return nil
}

// hasSpeech reports whether text has anything to say: a letter or digit.
func hasSpeech(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}
