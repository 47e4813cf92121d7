package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/internal/ellipsis"
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
}

// DraftBuilder gives the prompt of an agent turn as it would be if the user's turn in
// progress ended with userText now, split after the user's text: prefix can be
// evaluated while the user speaks, prefix+closing is the whole prompt. The dialogue
// history implements it; it is called on worker goroutines.
type DraftBuilder interface {
	DraftPrompt(ctx context.Context, turnID int, userText string) (prefix, closing string, stop []string, err error)
}

// Clause is the payload of clause IUs: one speakable piece of the agent's reply.
//
// The module ADDs a clause IU when its first words arrive, UPDATEs it as it grows and
// COMMITs it once it is complete and the next text has arrived (or the generation
// ended, with Last set). Waiting for the next piece costs one token's time and tells
// consumers reliably which clause is the turn's last. On interruption the clause that
// is not committed yet is REVOKEd. In a prepared turn a complete clause is UPDATEd with
// Prepared set instead of committed; the confirmation commits the prepared clauses, a
// withdrawal revokes them.
type Clause struct {
	TurnID int
	// ClauseID numbers the turn's clauses from 0.
	ClauseID int
	// Text is the clause, trimmed of surrounding white space.
	Text string
	// Last marks the final clause of a reply that ended normally.
	Last bool
	// Prepared marks a complete clause of a turn prepared before the user's turn surely
	// ended (control.Prepare): it is spoken tentatively (synthesised, its audio held by
	// the speaker) until it is committed, when the turn is confirmed, or revoked.
	Prepared bool
}

// IsPrepared tells the TTS that the clause may be synthesised before its commit.
func (c Clause) IsPrepared() bool { return c.Prepared }

// Kind implements iu.Payload.
func (Clause) Kind() string { return "clause" }

// Summary implements iu.Payload.
func (c Clause) Summary() string {
	last := ""
	if c.Last {
		last = " (last)"
	}
	if c.Prepared {
		last += " (prepared)"
	}
	return fmt.Sprintf("turn %d clause %d%s: %q", c.TurnID, c.ClauseID, last, ellipsis.Cut(c.Text, 60))
}

// Reply is the payload of reply IUs: the whole generated turn, ADDed and COMMITted
// together when the generation ended, was interrupted or failed.
type Reply struct {
	TurnID int
	// Text is everything generated, cut at a stop string, before the stream filter.
	Text string
	// Spoken is the text after the stream filter, which the clauses were cut from.
	Spoken string
	// Clauses are the texts of the committed clauses, in order.
	Clauses []string
	// Interrupted says the turn was interrupted (or superseded by a newer Respond).
	Interrupted bool
	// Prepared says the turn was prepared ahead (control.Prepare) and confirmed.
	Prepared bool
	// Withdrawn says the turn was prepared ahead and withdrawn: nobody heard any of it,
	// and Result.Tokens were generated in vain.
	Withdrawn bool
	// Err describes the failure when the engine or the prompt builder failed; the reply
	// then holds what was generated before.
	Err string
	// Result holds the engine's statistics. For an interrupted turn, whose engine is
	// still stopping when the reply goes out, only the text and the number of pieces
	// received are filled in.
	Result Result
	// TimeToFirstToken and TimeToFirstClause run on the network's clock from the
	// Respond command to the first generated piece and to the first committed clause.
	TimeToFirstToken  time.Duration
	TimeToFirstClause time.Duration
}

// Kind implements iu.Payload.
func (Reply) Kind() string { return "reply" }

// Summary implements iu.Payload.
func (r Reply) Summary() string {
	var flags []string
	if r.Interrupted {
		flags = append(flags, "interrupted")
	}
	if r.Prepared {
		flags = append(flags, "prepared")
	}
	if r.Withdrawn {
		flags = append(flags, "withdrawn")
	}
	if r.Err != "" {
		flags = append(flags, "error: "+r.Err)
	}
	f := ""
	if len(flags) > 0 {
		f = " (" + strings.Join(flags, "; ") + ")"
	}
	return fmt.Sprintf("turn %d reply%s: %q", r.TurnID, f, ellipsis.Cut(r.Text, 80))
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

// turn is the state of a generation; only the module goroutine uses it.
type turn struct {
	gen      int
	turnID   int
	respond  iu.ID
	cancel   context.CancelFunc
	started  time.Time
	filter   StreamFilter
	splitter *ClauseSplitter
	prompt   string   // the prompt it runs on, once the worker said
	stop     []string // and its stop strings

	raw, spoken strings.Builder
	pieces      int
	nextClause  int
	open        *iu.IU // the clause IU not committed yet
	complete    bool   // open holds a complete clause, committed once more text follows
	committed   []string

	// A prepared turn: its complete clauses wait in ready until the turn is confirmed
	// (committed) or withdrawn (revoked), and so does its reply once generated.
	prepared   bool
	confirming bool // a Respond arrived; the prompt check runs
	// checked is the confirmed turn's prompt as the history gives it now, waiting for
	// the generation's own prompt to compare with.
	checked     *confirmChecked
	ready       []iu.IU
	done        *genDone // the generation ended while the turn was prepared
	wasPrepared bool     // prepared, then confirmed
	// pause asks the generation's worker to pause (llm.ErrPause) once a prepared
	// turn's first clause is ready, when the engine is a Pauser: the rest is generated
	// only if the turn is confirmed, and a preparation costs the machine little while
	// the recogniser decodes the end of the user's turn. paused: it did.
	pause  *atomic.Bool
	paused bool
	// trimmed: the end of the reply was dropped (a failure or the token limit cut a
	// clause short), so its spoken text is that of its committed clauses.
	trimmed bool

	firstToken, firstClause time.Duration
	gotToken, gotClause     bool
}

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

// draftTurn is the turn id drafts are built for: later than any stored turn, so a
// draft shows the whole history (the id itself never appears in a prompt).
const draftTurn = 1 << 30

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
		t.pause = new(atomic.Bool)
	}
	pause := t.pause
	if m.cfg.NewFilter != nil {
		t.filter = m.cfg.NewFilter()
	}
	r.cur = t
	drafts := r.drafts
	p.Go(func() {
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
			p.Post(ctx, genDone{gen: gen, res: Result{StopReason: StopError}, err: fmt.Errorf("llm: building the prompt of turn %d: %w", turnID, err)})
			return
		}
		stop = append(append([]string(nil), stop...), m.cfg.Stop...)
		if p.Post(genCtx, genPrompt{gen: gen, prompt: prompt, stop: stop}) != nil {
			p.Post(ctx, genDone{gen: gen, res: Result{StopReason: StopCancelled}, err: CancelledError(genCtx, nil)})
			return
		}
		req := Request{
			Prompt:    prompt,
			MaxTokens: m.cfg.MaxTokens,
			Stop:      stop,
			Sampling:  m.cfg.Sampling,
		}
		res, err := m.engine.Generate(genCtx, req, func(piece string) error {
			if err := p.Post(genCtx, genPiece{gen: gen, piece: piece}); err != nil {
				return err
			}
			if pause != nil && pause.Load() {
				return ErrPause
			}
			return nil
		})
		p.Post(ctx, genDone{gen: gen, res: res, err: err})
	})
}

// resume continues a confirmed turn whose generation paused after its first clause.
// When the engine dropped the paused generation meanwhile (a prefill of the user's
// words ran while the turn waited, for the end-of-turn estimate), the rest is generated
// from the prompt followed by what was generated so far: a continuation of the same
// text, if not always the tokens the paused generation would have chosen.
func (r *runner) resume(ctx context.Context, t *turn) {
	t.paused = false
	gen, p, m := t.gen, r.p, r.m
	pauser := m.engine.(Pauser)
	sofar := t.raw.String()
	again := Request{Prompt: t.prompt + sofar, Stop: t.stop, Sampling: m.cfg.Sampling}
	before := t.pieces
	if m.cfg.MaxTokens > 0 {
		again.MaxTokens = max(m.cfg.MaxTokens-before, 1)
	}
	genCtx, cancel := context.WithCancel(ctx)
	t.cancel = cancel
	p.Go(func() {
		defer cancel()
		emit := func(piece string) error { return p.Post(genCtx, genPiece{gen: gen, piece: piece}) }
		res, err := pauser.Continue(genCtx, emit)
		if errors.Is(err, ErrNothingPaused) {
			res, err = m.engine.Generate(genCtx, again, emit)
			res.Tokens += before
			res.Text = sofar + res.Text
		}
		p.Post(ctx, genDone{gen: gen, res: res, err: err})
	})
}

// confirm makes a prepared turn real once its prompt is checked: the history may have
// changed since the draft (a summary arrived), and then the reply is generated again.
func (r *runner) confirm(ctx context.Context, t *turn) {
	t.confirming = true
	gen, turnID, p, prompts := t.gen, t.turnID, r.p, r.m.prompts
	p.Go(func() {
		prompt, _, err := prompts.BuildPrompt(ctx, turnID)
		p.Post(ctx, confirmChecked{gen: gen, prompt: prompt, err: err})
	})
}

// adopt turns a checked prepared turn into a normal one: its ready clauses are
// committed, and its reply goes out if the generation already ended.
func (r *runner) adopt(ctx context.Context, t *turn) error {
	t.prepared, t.confirming, t.wasPrepared = false, false, true
	ups := make([]iu.Update, 0, len(t.ready))
	for _, u := range t.ready {
		ups = append(ups, iu.CommitOf(u))
	}
	t.ready = nil
	r.log.Debug("prepared turn confirmed", zap.Int("turn", t.turnID), zap.Int("clauses", len(ups)), zap.Bool("generated", t.done != nil))
	if err := r.p.Send(ctx, ups...); err != nil {
		return err
	}
	if t.paused {
		r.resume(ctx, t)
		return nil
	}
	if d := t.done; d != nil {
		// The clauses were settled when the generation ended.
		t.done = nil
		r.cur = nil
		t.cancel()
		return r.m.sendReply(ctx, r.p, t, d.res, d.err, nil)
	}
	return nil
}

// checked adopts a confirmed turn whose prompt is still the history's, and otherwise
// generates the turn again.
func (r *runner) checked(ctx context.Context, cur *turn, v confirmChecked) error {
	if v.err == nil && cur.prompt != "" && v.prompt == cur.prompt {
		return r.adopt(ctx, cur)
	}
	// The history changed under the draft: generate the turn again from it.
	r.log.Info("prepared turn generated again: its prompt changed", zap.Int("turn", cur.turnID), zap.Error(v.err))
	respond := cur.respond
	if err := r.withdraw(ctx, "prompt changed"); err != nil {
		return err
	}
	r.start(ctx, cur.turnID, respond, "")
	return nil
}

// withdraw drops the prepared turn: its generation stops and every IU of it is revoked.
func (r *runner) withdraw(ctx context.Context, why string) error {
	t := r.cur
	r.cur = nil
	t.cancel()
	var ups []iu.Update
	for _, u := range t.ready {
		ups = append(ups, iu.RevokeOf(u))
	}
	ups = append(ups, t.revokeOpen()...)
	tokens := t.pieces
	if t.done != nil && t.done.res.Tokens > 0 {
		tokens = t.done.res.Tokens
	}
	reply := t.reply(Result{Text: t.raw.String(), Tokens: tokens, StopReason: StopCancelled})
	reply.Withdrawn = true
	rep := r.p.NewIU(reply, t.respond)
	ups = append(ups, iu.AddOf(rep), iu.CommitOf(rep))
	r.log.Debug("prepared turn withdrawn", zap.Int("turn", t.turnID), zap.String("why", why), zap.Int("tokens", tokens))
	return r.p.Send(ctx, ups...)
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
		return r.m.piece(ctx, r.p, cur, v.piece)
	case genDone:
		if cur == nil || v.gen != cur.gen {
			return nil
		}
		if v.err == nil && v.res.StopReason == StopPaused {
			// The first clause is ready: the rest waits for the confirmation, unless it
			// came already.
			cur.paused = true
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

// maybePrefill feeds the user's current words to the engine when it is free.
func (r *runner) maybePrefill(ctx context.Context) {
	if r.prefiller == nil || !r.prefillWanted || r.prefilling != nil || r.inputDone {
		return
	}
	if r.cur != nil && !(r.cur.prepared && (r.cur.done != nil || r.cur.paused)) {
		return // the engine is generating; the words wait
	}
	var words []string
	for _, w := range r.words.Words() {
		words = append(words, w.Text)
	}
	text := strings.Join(words, " ")
	r.prefillWanted = false
	if text == "" || text == r.prefilled {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	r.prefilling = cancel
	utt, drafts, eng, p := r.utterance, r.drafts, r.prefiller, r.p
	p.Go(func() {
		defer cancel()
		prefix, closing, _, err := drafts.DraftPrompt(pctx, draftTurn, text)
		var res PrefillResult
		if err == nil {
			res, err = eng.Prefill(pctx, prefix, TurnEnds(closing))
		}
		p.Post(ctx, prefillDone{utterance: utt, text: text, res: res, err: err})
		if err != nil {
			return
		}
		// The closing too, so that a reply prepared for these words starts at once: its
		// prompt is this one, evaluated to the end. New words roll it back.
		_, err = eng.Prefill(pctx, prefix+closing, nil)
		p.Post(ctx, prefillDone{utterance: utt, text: text, err: err, closed: true})
	})
}

// cancelPrefill stops a running prefill: a generation must not wait for it.
func (r *runner) cancelPrefill() {
	if r.prefilling != nil {
		r.prefilling()
		r.prefillWanted = true // its words may still be worth feeding later
	}
}

// piece handles generated text: it grows the open clause and commits finished ones.
func (m *Module) piece(ctx context.Context, p *iu.Ports, t *turn, piece string) error {
	if !t.gotToken {
		t.gotToken, t.firstToken = true, p.Now().Sub(t.started)
	}
	t.pieces++
	t.raw.WriteString(piece)
	text := piece
	if t.filter != nil {
		text = t.filter.Push(piece)
	}
	return p.Send(ctx, m.advance(p, t, text, false)...)
}

// advance feeds spoken text to the splitter and returns the clause updates it causes.
// At the end of a generation (final) the clause in progress is left to finish.
func (m *Module) advance(p *iu.Ports, t *turn, text string, final bool) []iu.Update {
	if text == "" {
		return nil
	}
	t.spoken.WriteString(text)
	var ups []iu.Update
	for _, c := range t.splitter.Push(text) {
		ups = append(ups, t.commitComplete(p)...)
		ups = append(ups, t.setOpen(p, c, false)...)
		t.complete = true
	}
	if pending := t.splitter.Pending(); pending != "" && !final {
		ups = append(ups, t.commitComplete(p)...)
		ups = append(ups, t.setOpen(p, pending, false)...)
	}
	return ups
}

// setOpen makes the open clause say text: an ADD for a new clause, an UPDATE otherwise.
func (t *turn) setOpen(p *iu.Ports, text string, last bool) []iu.Update {
	if t.open == nil {
		u := p.NewIU(Clause{TurnID: t.turnID, ClauseID: t.nextClause, Text: text, Last: last}, t.respond)
		t.nextClause++
		t.open = &u
		return []iu.Update{iu.AddOf(u)}
	}
	old := t.open.Payload.(Clause)
	if old.Text == text && old.Last == last {
		return nil
	}
	c := old
	c.Text, c.Last = text, last
	up := iu.UpdateOf(*t.open, c)
	t.open.Payload = c
	return []iu.Update{up}
}

// commitComplete commits the open clause if it is complete.
func (t *turn) commitComplete(p *iu.Ports) []iu.Update {
	if t.open == nil || !t.complete {
		return nil
	}
	return t.commitOpen(p)
}

// commitOpen commits the open clause, or in a prepared turn marks it prepared.
func (t *turn) commitOpen(p *iu.Ports) []iu.Update {
	t.committed = append(t.committed, t.open.Payload.(Clause).Text)
	if !t.gotClause {
		t.gotClause, t.firstClause = true, p.Now().Sub(t.started)
	}
	u := *t.open
	t.open, t.complete = nil, false
	if t.prepared {
		c := u.Payload.(Clause)
		c.Prepared = true
		up := iu.UpdateOf(u, c)
		u.Payload = c
		t.ready = append(t.ready, u)
		if t.pause != nil {
			t.pause.Store(true)
		}
		return []iu.Update{up}
	}
	return []iu.Update{iu.CommitOf(u)}
}

// revokeOpen withdraws the clause that is not committed.
func (t *turn) revokeOpen() []iu.Update {
	if t.open == nil {
		return nil
	}
	up := iu.RevokeOf(*t.open)
	t.open, t.complete = nil, false
	return []iu.Update{up}
}

// finalClauses settles the clauses at the end of a generation: the text held back is
// flushed, the clause in progress is completed (with Last set) or, when the generation
// failed or ran out of tokens mid-clause, withdrawn: the turn ends with what was complete.
func (m *Module) finalClauses(p *iu.Ports, t *turn, res Result, genErr error) []iu.Update {
	var ups []iu.Update
	if t.filter != nil {
		ups = append(ups, m.advance(p, t, t.filter.Flush(), true)...)
	}
	rest := t.splitter.Flush()
	failed := genErr != nil && res.StopReason != StopCancelled
	cut := !failed && res.StopReason == StopLength
	switch {
	case failed || cut:
		// Speak the clauses that are complete, never a fragment cut off mid-sentence
		// or mid-word. A clause in progress that ends with sentence punctuation counts
		// as complete; with nothing complete, or when the last complete clause was cut
		// mid-sentence by a word limit (the sentence is being spoken already), a reply
		// cut by the token limit keeps its complete words.
		if rest != "" && endsSentence(rest) {
			ups = append(ups, t.commitComplete(p)...)
			ups = append(ups, t.setOpen(p, rest, false)...)
			t.complete = true
		}
		if cut && !t.complete && (len(t.committed) == 0 || !endsSentence(t.committed[len(t.committed)-1])) {
			text := rest
			if t.open != nil {
				text = t.open.Payload.(Clause).Text
				if rest != "" {
					text = rest
				}
			}
			// With nothing before it, a lone word is kept: a reply of one cut word
			// says more than silence.
			words := completeWords(text)
			if words == "" && len(t.committed) == 0 {
				words = strings.TrimSpace(text)
			}
			if words != "" {
				ups = append(ups, t.setOpen(p, words, false)...)
				t.complete = true
			}
		}
		if t.open != nil && t.complete {
			ups = append(ups, t.setOpen(p, t.open.Payload.(Clause).Text, true)...)
			ups = append(ups, t.commitOpen(p)...)
		}
		if t.open != nil || rest != "" {
			t.trimmed = true
		}
		ups = append(ups, t.revokeOpen()...)
		if failed {
			p.Logger().Error("generation failed; the turn ends with what was generated before",
				zap.Int("turn", t.turnID), zap.Int("pieces", t.pieces), zap.Error(genErr))
		}
	default:
		if rest != "" {
			ups = append(ups, t.commitComplete(p)...)
			ups = append(ups, t.setOpen(p, rest, true)...)
		}
		if t.open != nil {
			ups = append(ups, t.setOpen(p, t.open.Payload.(Clause).Text, true)...)
			ups = append(ups, t.commitOpen(p)...)
		}
	}
	return ups
}

// completeWords returns text without its last word, which the token limit may have cut
// ("" when it is one word).
func completeWords(text string) string {
	text = strings.TrimSpace(text)
	i := strings.LastIndexFunc(text, unicode.IsSpace)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(text[:i])
}

// finish ends a turn whose generation returned.
func (m *Module) finish(ctx context.Context, p *iu.Ports, t *turn, res Result, genErr error) error {
	t.cancel()
	return m.sendReply(ctx, p, t, res, genErr, m.finalClauses(p, t, res, genErr))
}

// sendReply sends ups and the turn's reply.
func (m *Module) sendReply(ctx context.Context, p *iu.Ports, t *turn, res Result, genErr error, ups []iu.Update) error {
	failed := genErr != nil && res.StopReason != StopCancelled
	reply := t.reply(res)
	if failed {
		reply.Err = genErr.Error()
	}
	if genErr != nil && res.StopReason == StopCancelled {
		// Cancelled without an Interrupt (the network is stopping).
		reply.Interrupted = true
	}
	r := p.NewIU(reply, t.respond)
	ups = append(ups, iu.AddOf(r), iu.CommitOf(r))
	return p.Send(ctx, ups...)
}

// interrupt stops a turn at once: the generation is cancelled, the clause that is not
// committed is revoked and the reply is emitted as interrupted.
func (m *Module) interrupt(ctx context.Context, p *iu.Ports, t *turn) error {
	t.cancel()
	ups := t.revokeOpen()
	res := Result{Text: t.raw.String(), Tokens: t.pieces, StopReason: StopCancelled}
	reply := t.reply(res)
	reply.Interrupted = true
	r := p.NewIU(reply, t.respond)
	ups = append(ups, iu.AddOf(r), iu.CommitOf(r))
	return p.Send(ctx, ups...)
}

// reply is the turn's reply payload. Spoken is what the clauses say: for a reply cut
// short, the text of its committed clauses, so that history and audio agree.
func (t *turn) reply(res Result) Reply {
	spoken := t.spoken.String()
	if t.trimmed {
		spoken = strings.Join(t.committed, " ")
	}
	return Reply{
		TurnID:            t.turnID,
		Text:              t.raw.String(), // every piece the engine emitted, in order
		Spoken:            spoken,
		Clauses:           append([]string(nil), t.committed...),
		Prepared:          t.wasPrepared,
		Result:            res,
		TimeToFirstToken:  t.firstToken,
		TimeToFirstClause: t.firstClause,
	}
}

// endsSentence reports whether text ends with sentence punctuation, possibly followed by
// closing quotes or brackets.
func endsSentence(text string) bool {
	text = strings.TrimRightFunc(text, isCloser)
	r, _ := utf8.DecodeLastRuneInString(text)
	return isSentencePunct(r) || r == '。' || r == '！' || r == '？'
}
