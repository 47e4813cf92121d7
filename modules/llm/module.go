package llm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"go.uber.org/zap"
)

// PromptBuilder gives the LLM module the prompt of an agent turn; the dialogue history
// implements it. It is called on a worker goroutine, so it must be safe to call while
// the rest of the network runs. stop lists the strings that end the generation (the
// start of the user's next turn in the prompt format), so that the model's imitation of
// the user is never spoken.
type PromptBuilder interface {
	BuildPrompt(ctx context.Context, turnID int) (prompt string, stop []string, err error)
}

// StreamFilter transforms the generated text on its way to the clause splitter (for
// example to drop markup that should not be spoken). Push gets each piece and returns
// the text to pass on now; Flush returns what it held back when the generation ends.
// A filter is used for one turn only.
type StreamFilter interface {
	Push(piece string) string
	Flush() string
}

// Config configures the LLM module.
type Config struct {
	// MaxTokens limits each reply (0: no limit but the context).
	MaxTokens int
	// Sampling chooses tokens (zero value: greedy).
	Sampling Sampling
	// Stop adds stop strings to those of the prompt builder.
	Stop []string
	// Clauses tunes the clause splitter.
	Clauses ClauseConfig
	// NewFilter, when set, makes the stream filter of each turn.
	NewFilter func() StreamFilter
	// Prefill feeds the user's words to the engine while they speak (when the engine is
	// a Prefiller and the prompt builder a DraftBuilder), so that the end of the turn
	// finds the prompt evaluated, and reports the model's estimate that the user's turn
	// is complete (TurnCompletion IUs).
	Prefill bool
	// NoEstimate is for a Prefill whose estimate nothing reads (an end-of-turn policy on
	// words alone): the prefill then only readies the prompt, and sends no
	// TurnCompletion.
	NoEstimate bool
}

// DraftBuilder gives the prompt of an agent turn as it would be if the user's turn in
// progress ended with userText now, split after the user's text: prefix can be
// evaluated while the user speaks, prefix+closing is the whole prompt. The dialogue
// history implements it; it is called on worker goroutines.
type DraftBuilder interface {
	DraftPrompt(ctx context.Context, turnID int, userText string) (prefix, closing string, stop []string, err error)
}

// Module is the LLM network module. It consumes control.Command IUs: Respond starts
// generating the turn, Interrupt stops it at once, Prepare generates a turn ahead from
// the user's words so far (tentatively: see Clause), which a Respond for the same turn
// confirms and Withdraw drops. With Config.Prefill it also consumes the recogniser's
// words and feeds them to the engine while the user speaks. It produces clause, reply
// and turn-completion IUs.
type Module struct {
	name    string
	engine  Engine
	prompts PromptBuilder
	cfg     Config
}

var _ iu.Module = (*Module)(nil)

// NewModule returns an LLM module. The caller keeps ownership of engine.
func NewModule(name string, engine Engine, prompts PromptBuilder, cfg Config) *Module {
	return &Module{name: name, engine: engine, prompts: prompts, cfg: cfg}
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Messages from the workers to the module goroutine.
type (
	genPiece struct {
		gen   int
		piece string
	}
	genDone struct {
		gen int
		res Result
		err error
	}
	// genPrompt tells which prompt (and stop strings) a generation runs on.
	genPrompt struct {
		gen    int
		prompt string
		stop   []string
	}
	// confirmChecked is the prompt a confirmed prepared turn would have been given.
	confirmChecked struct {
		gen    int
		prompt string
		err    error
	}
	// prefillDone reports a prefill of the user's words (and their estimate); when it
	// succeeded, a second one follows once the prompt's closing is evaluated too
	// (closed). A failed prefill is closed at once.
	prefillDone struct {
		utterance int
		text      string
		res       PrefillResult
		err       error
		closed    bool
	}
)

// runner is the module goroutine's state.
type runner struct {
	m         *Module
	p         *iu.Ports
	log       *zap.Logger
	cur       *turn
	gens      int
	inputDone bool

	// Incremental input: the user's words, and the prefill running or wanted.
	prefiller     Prefiller
	drafts        DraftBuilder
	words         asr.WordList
	utterance     int
	prefilling    context.CancelFunc // set while a prefill runs
	prefillWanted bool               // the words changed since the running prefill began
	prefilled     string             // the text of the last prefill that ran
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	r := &runner{m: m, p: p, log: p.Logger()}
	if m.cfg.Prefill {
		r.prefiller, _ = m.engine.(Prefiller)
		r.drafts, _ = m.prompts.(DraftBuilder)
		if r.prefiller == nil || r.drafts == nil {
			r.log.Info("incremental input is off: the engine cannot prefill or the history gives no drafts")
		}
	}
	defer func() {
		if r.cur != nil {
			r.cur.cancel()
		}
		if r.prefilling != nil {
			r.prefilling()
		}
	}()
	for {
		if r.inputDone && r.cur != nil && r.cur.prepared && !r.cur.confirming {
			// Nobody will confirm it now.
			if err := r.withdraw(ctx, "input ended"); err != nil {
				return err
			}
		}
		if r.inputDone && r.cur == nil && r.prefilling == nil {
			return nil
		}
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			// A reply in progress is finished first: replays end with their last turn.
			r.inputDone = true
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
		}
		r.maybePrefill(ctx)
	}
}

func (r *runner) update(ctx context.Context, up iu.Update) error {
	switch pl := up.IU.Payload.(type) {
	case control.Command:
		if up.Type == iu.Add {
			return r.command(ctx, pl, up.IU.ID)
		}
	case asr.Word:
		if r.prefiller == nil || r.drafts == nil {
			return nil
		}
		if pl.Utterance != r.utterance {
			r.words.Reset()
			r.utterance = pl.Utterance
		}
		if r.words.Apply(up) {
			r.prefillWanted = true
		}
	case asr.Utterance:
		// The turn's words are final; the next words belong to the next turn.
		r.words.Reset()
		r.prefillWanted = false
	}
	return nil
}

func (r *runner) command(ctx context.Context, cmd control.Command, id iu.ID) error {
	cur := r.cur
	switch cmd.Action {
	case control.Respond:
		if cur != nil && cur.turnID == cmd.TurnID {
			if cur.prepared && !cur.confirming {
				r.confirm(ctx, cur)
				return nil
			}
			r.log.Debug("respond for the turn in progress ignored", zap.Int("turn", cmd.TurnID))
			return nil
		}
		if err := r.stop(ctx, "a new turn supersedes it"); err != nil {
			return err
		}
		r.start(ctx, cmd.TurnID, id, "")
	case control.Prepare:
		if cur != nil && !cur.prepared {
			r.log.Debug("prepare ignored: a turn is being generated", zap.Int("turn", cmd.TurnID), zap.Int("generating", cur.turnID))
			return nil
		}
		if err := r.stop(ctx, "prepared again"); err != nil {
			return err
		}
		r.start(ctx, cmd.TurnID, id, cmd.Text)
	case control.Withdraw:
		if cur != nil && cur.turnID == cmd.TurnID && cur.prepared {
			return r.withdraw(ctx, cmd.Reason)
		}
	case control.Interrupt:
		if cur == nil || cur.turnID != cmd.TurnID {
			return nil
		}
		return r.stop(ctx, "interrupted")
	}
	return nil
}

// stop ends the current turn, if any: a prepared one is withdrawn, another interrupted.
func (r *runner) stop(ctx context.Context, why string) error {
	cur := r.cur
	if cur == nil {
		return nil
	}
	if cur.prepared {
		return r.withdraw(ctx, why)
	}
	r.log.Info("turn stopped", zap.Int("turn", cur.turnID), zap.String("why", why))
	r.cur = nil
	return r.m.interrupt(ctx, r.p, cur)
}

// start begins generating a turn on a worker: from the history (userText empty) or, for
// a prepared turn, from a draft with the user's words so far.
func (r *runner) start(ctx context.Context, turnID int, respond iu.ID, userText string) {
	r.cancelPrefill()
	m, p := r.m, r.p
	r.gens++
	gen := r.gens
	genCtx, cancel := context.WithCancel(ctx)
	t := &turn{gen: gen, turnID: turnID, respond: respond, cancel: cancel, started: p.Now(),
		splitter: NewClauseSplitter(m.cfg.Clauses), prepared: userText != ""}
	if _, ok := m.engine.(Pauser); ok && t.prepared {
		t.acks = make(chan bool, 1)
	}
	acks := t.acks
	if m.cfg.NewFilter != nil {
		t.filter = m.cfg.NewFilter()
	}
	r.cur = t
	drafts := r.drafts
	p.Go(func(w iu.Worker) {
		defer cancel()
		var prompt string
		var stop []string
		var err error
		if t.prepared && drafts != nil {
			var prefix, closing string
			prefix, closing, stop, err = drafts.DraftPrompt(genCtx, turnID, userText)
			prompt = prefix + closing
		} else if t.prepared {
			err = errors.New("the history gives no drafts")
		} else {
			prompt, stop, err = m.prompts.BuildPrompt(genCtx, turnID)
		}
		if err != nil {
			w.Post(ctx, genDone{gen: gen, res: Result{StopReason: StopError}, err: fmt.Errorf("llm: building the prompt of turn %d: %w", turnID, err)})
			return
		}
		stop = append(append([]string(nil), stop...), m.cfg.Stop...)
		if w.Post(genCtx, genPrompt{gen: gen, prompt: prompt, stop: stop}) != nil {
			w.Post(ctx, genDone{gen: gen, res: Result{StopReason: StopCancelled}, err: CancelledError(genCtx, nil)})
			return
		}
		req := Request{
			Prompt:    prompt,
			MaxTokens: m.cfg.MaxTokens,
			Stop:      stop,
			Sampling:  m.cfg.Sampling,
		}
		res, err := m.engine.Generate(genCtx, req, func(piece string) error {
			if err := w.Post(genCtx, genPiece{gen: gen, piece: piece}); err != nil {
				return err
			}
			if acks == nil {
				return nil
			}
			select {
			case pause := <-acks:
				if pause {
					return ErrPause
				}
				return nil
			case <-genCtx.Done():
				return genCtx.Err()
			}
		})
		w.Post(ctx, genDone{gen: gen, res: res, err: err})
	})
}

func (r *runner) local(ctx context.Context, v any) error {
	cur := r.cur
	switch v := v.(type) {
	case genPrompt:
		if cur != nil && v.gen == cur.gen {
			cur.prompt, cur.stop = v.prompt, v.stop
			if c := cur.checked; c != nil {
				cur.checked = nil
				return r.checked(ctx, cur, *c)
			}
		}
	case genPiece:
		if cur == nil || v.gen != cur.gen {
			return nil // a stopped generation's last words
		}
		err := r.m.piece(ctx, r.p, cur, v.piece)
		if cur.acks != nil {
			// One piece, one answer; the worker waits for it unless it was stopped.
			select {
			case cur.acks <- cur.pausing:
			default:
			}
		}
		return err
	case genDone:
		if cur == nil || v.gen != cur.gen {
			return nil
		}
		if v.err == nil && v.res.StopReason == StopPaused {
			// The first clause is ready: the rest waits for the confirmation, unless it
			// came already.
			cur.paused, cur.acks = true, nil
			if !cur.prepared {
				r.resume(ctx, cur)
			}
			return nil
		}
		if cur.prepared {
			// Held until the turn is confirmed or withdrawn; the clause in progress is
			// complete now, so it is prepared like the others.
			d := v
			cur.done = &d
			return r.p.Send(ctx, r.m.finalClauses(r.p, cur, v.res, v.err)...)
		}
		r.cur = nil
		return r.m.finish(ctx, r.p, cur, v.res, v.err)
	case confirmChecked:
		if cur == nil || v.gen != cur.gen || !cur.confirming {
			return nil
		}
		if cur.prompt == "" && cur.done == nil && v.err == nil {
			cur.checked = &v // the generation has not said its prompt yet
			return nil
		}
		return r.checked(ctx, cur, v)
	case prefillDone:
		if v.closed || v.err != nil {
			r.prefilling = nil
		}
		if v.closed {
			return nil
		}
		if v.err != nil {
			switch {
			case errors.Is(v.err, ErrNoPrefill):
				r.log.Info("incremental input is off: the engine cannot prefill", zap.Error(v.err))
				r.prefiller = nil
			case ctx.Err() == nil && !errors.Is(v.err, context.Canceled):
				r.log.Debug("prefill failed", zap.String("text", v.text), zap.Error(v.err))
			}
			return nil
		}
		r.prefilled = v.text
		if v.res.Next < 0 || v.utterance != r.utterance {
			return nil
		}
		u := r.p.NewIU(TurnCompletion{Utterance: v.utterance, Text: v.text, P: v.res.Next, PMax: v.res.NextMax,
			Tokens: v.res.Tokens, Evaluated: v.res.Tokens - v.res.Cached})
		return r.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}
	return nil
}
