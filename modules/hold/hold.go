// Package hold is the turn-based baseline's speech gate: it passes the LLM's clauses on
// to the TTS only once the whole reply is there, the pipeline that `agent bench` compares
// the incremental one with.
package hold

import (
	"context"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/llm"
)

// Clause is a clause of the LLM's that the module held until its reply was complete
// (kind "clause", as the LLM's; the TTS speaks it as it would the LLM's). Its own type
// tells it from the LLM's clauses, which time the LLM.
type Clause struct{ llm.Clause }

// Module holds each turn's committed clauses (llm.Clause) until the turn's reply
// (llm.Reply) arrives, then sends them as its own Clause IUs, grounded in the LLM's. It
// drops a turn's clauses when the turn is interrupted (a control.Interrupt, or an
// interrupted reply).
type Module struct{ name string }

// New returns a hold module.
func New(name string) *Module { return &Module{name: name} }

// Name implements iu.Module.
func (h *Module) Name() string { return h.name }

// Run implements iu.Module.
func (h *Module) Run(ctx context.Context, p *iu.Ports) error {
	held := map[int][]iu.IU{} // committed clauses by turn
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		if ev.Kind == iu.EventInputDone {
			return nil
		}
		if ev.Kind != iu.EventMessage {
			continue
		}
		for _, up := range ev.Message.Updates {
			switch pl := up.IU.Payload.(type) {
			case llm.Clause:
				if up.Type == iu.Commit {
					held[pl.TurnID] = append(held[pl.TurnID], up.IU)
				}
			case llm.Reply:
				if up.Type != iu.Add {
					continue
				}
				clauses := held[pl.TurnID]
				delete(held, pl.TurnID)
				if pl.Interrupted {
					continue
				}
				for _, c := range clauses {
					u := p.NewIU(Clause{c.Payload.(llm.Clause)}, c.ID)
					if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
						return err
					}
				}
			case control.Command:
				if pl.Action == control.Interrupt {
					delete(held, pl.TurnID)
				}
			}
		}
	}
}
