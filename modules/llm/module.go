package llm

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/iu"
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
}

// Clause is the payload of clause IUs: one speakable piece of the agent's reply.
//
// The module ADDs a clause IU when its first words arrive, UPDATEs it as it grows and
// COMMITs it once it is complete and the next text has arrived (or the generation
// ended, with Last set). Waiting for the next piece costs one token's time and tells
// consumers reliably which clause is the turn's last. On interruption the clause that
// is not committed yet is REVOKEd.
type Clause struct {
	TurnID int
	// ClauseID numbers the turn's clauses from 0.
	ClauseID int
	// Text is the clause, trimmed of surrounding white space.
	Text string
	// Last marks the final clause of a reply that ended normally.
	Last bool
}

// Kind implements iu.Payload.
func (Clause) Kind() string { return "clause" }

// Summary implements iu.Payload.
func (c Clause) Summary() string {
	last := ""
	if c.Last {
		last = " (last)"
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
// generating the turn, Interrupt stops it at once. It produces clause and reply IUs.
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

// Messages from the generation workers to the module goroutine.
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
)

// turn is the state of the generation in progress; only the module goroutine uses it.
type turn struct {
	gen      int
	turnID   int
	respond  iu.ID
	cancel   context.CancelFunc
	started  time.Time
	filter   StreamFilter
	splitter *ClauseSplitter

	raw, spoken strings.Builder
	pieces      int
	nextClause  int
	open        *iu.IU // the clause IU not committed yet
	complete    bool   // open holds a complete clause, committed once more text follows
	committed   []string

	firstToken, firstClause time.Duration
	gotToken, gotClause     bool
}

// Run implements iu.Module.
func (m *Module) Run(ctx context.Context, p *iu.Ports) error {
	log := p.Logger()
	var (
		cur       *turn
		gens      int
		inputDone bool
	)
	defer func() {
		if cur != nil {
			cur.cancel()
		}
	}()
	for {
		if inputDone && cur == nil {
			return nil
		}
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			// A reply in progress is finished first: replays end with their last turn.
			inputDone = true
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				cmd, ok := up.IU.Payload.(control.Command)
				if !ok || up.Type != iu.Add {
					continue
				}
				switch cmd.Action {
				case control.Respond:
					if cur != nil && cur.turnID == cmd.TurnID {
						log.Debug("respond for the turn in progress ignored", zap.Int("turn", cmd.TurnID))
						continue
					}
					if cur != nil {
						log.Info("a new turn supersedes the one in progress", zap.Int("turn", cur.turnID), zap.Int("new_turn", cmd.TurnID))
						if err := m.interrupt(ctx, p, cur); err != nil {
							return err
						}
					}
					gens++
					cur = m.start(ctx, p, gens, cmd.TurnID, up.IU.ID)
				case control.Interrupt:
					if cur == nil || cur.turnID != cmd.TurnID {
						continue
					}
					if err := m.interrupt(ctx, p, cur); err != nil {
						return err
					}
					cur = nil
				}
			}
		case iu.EventLocal:
			switch v := ev.Local.(type) {
			case genPiece:
				if cur == nil || v.gen != cur.gen {
					continue // a stopped generation's last words
				}
				if err := m.piece(ctx, p, cur, v.piece); err != nil {
					return err
				}
			case genDone:
				if cur == nil || v.gen != cur.gen {
					continue
				}
				if err := m.finish(ctx, p, cur, v.res, v.err); err != nil {
					return err
				}
				cur = nil
			}
		}
	}
}

// start begins generating a turn on a worker.
func (m *Module) start(ctx context.Context, p *iu.Ports, gen, turnID int, respond iu.ID) *turn {
	genCtx, cancel := context.WithCancel(ctx)
	t := &turn{gen: gen, turnID: turnID, respond: respond, cancel: cancel, started: p.Now(), splitter: NewClauseSplitter(m.cfg.Clauses)}
	if m.cfg.NewFilter != nil {
		t.filter = m.cfg.NewFilter()
	}
	p.Go(func() {
		defer cancel()
		prompt, stop, err := m.prompts.BuildPrompt(genCtx, turnID)
		if err != nil {
			p.Post(ctx, genDone{gen: gen, res: Result{StopReason: StopError}, err: fmt.Errorf("llm: building the prompt of turn %d: %w", turnID, err)})
			return
		}
		req := Request{
			Prompt:    prompt,
			MaxTokens: m.cfg.MaxTokens,
			Stop:      append(append([]string(nil), stop...), m.cfg.Stop...),
			Sampling:  m.cfg.Sampling,
		}
		res, err := m.engine.Generate(genCtx, req, func(piece string) error {
			return p.Post(genCtx, genPiece{gen: gen, piece: piece})
		})
		p.Post(ctx, genDone{gen: gen, res: res, err: err})
	})
	return t
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

func (t *turn) commitOpen(p *iu.Ports) []iu.Update {
	up := iu.CommitOf(*t.open)
	t.committed = append(t.committed, t.open.Payload.(Clause).Text)
	if !t.gotClause {
		t.gotClause, t.firstClause = true, p.Now().Sub(t.started)
	}
	t.open, t.complete = nil, false
	return []iu.Update{up}
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

// finish ends a turn whose generation returned.
func (m *Module) finish(ctx context.Context, p *iu.Ports, t *turn, res Result, genErr error) error {
	t.cancel()
	var ups []iu.Update
	if t.filter != nil {
		ups = append(ups, m.advance(p, t, t.filter.Flush(), true)...)
	}
	rest := t.splitter.Flush()
	failed := genErr != nil && res.StopReason != StopCancelled
	if failed {
		// Speak the clauses that are complete, never a fragment cut off mid-sentence. A
		// clause in progress that ends with sentence punctuation counts as complete.
		if rest != "" && endsSentence(rest) {
			ups = append(ups, t.commitComplete(p)...)
			ups = append(ups, t.setOpen(p, rest, false)...)
			t.complete = true
		}
		if t.open != nil && t.complete {
			ups = append(ups, t.setOpen(p, t.open.Payload.(Clause).Text, true)...)
			ups = append(ups, t.commitOpen(p)...)
		}
		ups = append(ups, t.revokeOpen()...)
		p.Logger().Error("generation failed; the turn ends with what was generated before",
			zap.Int("turn", t.turnID), zap.Int("pieces", t.pieces), zap.Error(genErr))
	} else {
		if rest != "" {
			ups = append(ups, t.commitComplete(p)...)
			ups = append(ups, t.setOpen(p, rest, true)...)
		}
		if t.open != nil {
			ups = append(ups, t.setOpen(p, t.open.Payload.(Clause).Text, true)...)
			ups = append(ups, t.commitOpen(p)...)
		}
	}
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

func (t *turn) reply(res Result) Reply {
	return Reply{
		TurnID:            t.turnID,
		Text:              t.raw.String(), // every piece the engine emitted, in order
		Spoken:            t.spoken.String(),
		Clauses:           append([]string(nil), t.committed...),
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
