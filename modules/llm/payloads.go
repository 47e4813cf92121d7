package llm

import (
	"fmt"
	"strings"
	"time"

	"github.com/parley-voice/parley/internal/ellipsis"
)

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
