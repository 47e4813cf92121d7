package llm

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
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
	// A prepared turn on a Pauser engine pauses (llm.ErrPause) once its first clause is
	// ready: the rest is generated only if the turn is confirmed, and a preparation
	// costs the machine little while the recogniser decodes the end of the user's turn.
	// Its worker waits after each piece for the module goroutine, which splits the
	// clauses, to say on acks whether to pause (pausing), so that it pauses after the
	// same piece however fast it generates. paused: it did.
	acks    chan bool
	pausing bool
	paused  bool
	// trimmed: the end of the reply was dropped (a failure or the token limit cut a
	// clause short), so its spoken text is that of its committed clauses.
	trimmed bool

	firstToken, firstClause time.Duration
	gotToken, gotClause     bool
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
		t.pausing = t.acks != nil
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
