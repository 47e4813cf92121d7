package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/turntaking"
	"go.uber.org/zap"
)

// do carries out the policy's actions in order.
func (c *conversation) do(ctx context.Context, acts []turntaking.Action) error {
	for _, act := range acts {
		if err := c.act(ctx, act); err != nil {
			return err
		}
	}
	return nil
}

// send sends a new IU with payload p, ADDed and COMMITted at once.
func (c *conversation) send(ctx context.Context, p iu.Payload) error {
	u := c.p.NewIU(p)
	return c.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

func (c *conversation) act(ctx context.Context, act turntaking.Action) error {
	switch {
	case act.Command != nil:
		c.logCommand(*act.Command)
		return c.send(ctx, *act.Command)
	case act.Say != nil:
		c.log.Info("re-engaging", zap.Int("turn", act.Say.TurnID), zap.String("text", act.Say.Text))
		return c.send(ctx, tts.Text{TurnID: act.Say.TurnID, Text: act.Say.Text})
	case act.BeginAgent != nil:
		return c.beginAgent(ctx, act.BeginAgent)
	case act.AgentHeard != nil:
		return c.agentHeard(ctx, act.AgentHeard)
	case act.CloseAgent != nil:
		return c.closeAgent(ctx, act.CloseAgent)
	case act.User != nil:
		return c.user(ctx, act.User)
	case act.Backchannel != nil:
		return c.backchannel(ctx, act.Backchannel)
	case act.State != nil:
		return c.send(ctx, TurnState{State: act.State.To, AgentTurn: act.State.TurnID})
	}
	return nil
}

// logCommand says what the manager asks of the agent's speech, and why.
func (c *conversation) logCommand(cmd control.Command) {
	turn, reason := zap.Int("turn", cmd.TurnID), zap.String("reason", cmd.Reason)
	switch cmd.Action {
	case control.Respond:
		c.log.Info("reply requested", turn, reason)
	case control.Pause:
		c.log.Info("pausing the agent", turn, reason)
	case control.Resume:
		c.log.Info("resuming the agent", turn, reason)
	case control.Interrupt:
		c.log.Info("interrupting the agent", turn, reason)
	case control.Prepare:
		c.log.Debug("preparing a reply", turn, zap.String("for", cmd.Text))
	case control.Withdraw:
		c.log.Debug("withdrawing the prepared reply", turn, reason)
	case control.Duck:
		c.log.Info("ducking the agent", turn, zap.Float64("gain_db", cmd.Gain), reason)
	case control.Unduck:
		c.log.Info("restoring the agent's volume", turn, reason)
	}
}

// beginAgent opens the agent-turn IU of a turn the policy asks for.
func (c *conversation) beginAgent(ctx context.Context, b *turntaking.BeginAgent) error {
	u := c.p.NewIU(AgentTurn{TurnID: b.TurnID, InReplyTo: b.InReplyTo, Fixed: b.Fixed != "", FullText: b.Fixed})
	c.agent = &u
	return c.p.Send(ctx, iu.AddOf(u))
}

// agentHeard updates the agent-turn IU with what the listener heard so far.
func (c *conversation) agentHeard(ctx context.Context, h *turntaking.AgentHeard) error {
	u := c.agent
	if u == nil {
		return nil
	}
	rec, ok := u.Payload.(AgentTurn)
	if !ok || rec.TurnID != h.TurnID {
		return nil
	}
	rec.Heard, rec.Text, rec.Start, rec.End = true, h.Text, h.Start, h.End
	up := iu.UpdateOf(*u, rec)
	c.agent = &up.IU
	return c.p.Send(ctx, up)
}

// closeAgent stores the agent turn as the policy says, and commits its agent-turn IU
// with what was stored.
func (c *conversation) closeAgent(ctx context.Context, ca *turntaking.CloseAgent) error {
	rec := AgentTurn{TurnID: ca.TurnID, InReplyTo: ca.InReplyTo, Text: ca.Text, FullText: ca.Text,
		Interrupted: ca.Interrupted, Closed: true, Stored: true, Start: ca.Start, End: ca.End}
	start, end := c.span(ca.Start, ca.End)
	switch {
	case !ca.Interrupted && ca.Text == "":
		// Nothing was said (the LLM failed before any text, or its reply was empty): an
		// empty agent utterance would only teach the model to say nothing.
		c.log.Info("agent turn empty, not stored", zap.Int("turn", ca.TurnID))
		rec.Stored = false
	case !ca.Interrupted:
		u := dialogue.Utterance{Speaker: dialogue.Agent, Text: ca.Text, TurnID: ca.TurnID, Start: start, End: end}
		if err := c.m.store.AppendUtterance(ctx, u); err != nil {
			return fmt.Errorf("manager: storing agent turn %d: %w", ca.TurnID, err)
		}
	case ca.Heard == nil:
		// The listener heard nothing of it: for them the turn never happened.
		c.log.Info("agent turn dropped unheard", zap.Int("turn", ca.TurnID))
		rec.Text, rec.Stored = "", false
	default:
		heard := *ca.Heard
		heard.Start, heard.End = start, end
		u, err := c.m.store.CutInterrupted(ctx, heard)
		if err != nil {
			return fmt.Errorf("manager: cutting agent turn %d to what was heard: %w", ca.TurnID, err)
		}
		rec.Text, rec.FullText = u.Text, u.FullText
		c.log.Info("agent turn cut to what was heard", zap.Int("turn", ca.TurnID), zap.String("heard", u.Text), zap.String("generated", u.FullText))
	}
	u := c.agent
	c.agent = nil
	if u == nil {
		return nil
	}
	if open, ok := u.Payload.(AgentTurn); ok {
		rec.Fixed, rec.Heard = open.Fixed, open.Heard
	}
	u.Payload = rec
	return c.p.Send(ctx, iu.CommitOf(*u))
}

// user stores a user turn and tells the network.
func (c *conversation) user(ctx context.Context, a *turntaking.UserTurn) error {
	u := dialogue.Utterance{Speaker: dialogue.User, Text: a.Text, TurnID: a.TurnID}
	u.Start, u.End = c.span(a.Start, a.End)
	if err := c.m.store.AppendUtterance(ctx, u); err != nil {
		return fmt.Errorf("manager: storing user turn %d: %w", u.TurnID, err)
	}
	c.log.Info("user turn", zap.Int("turn", u.TurnID), zap.String("text", u.Text))
	return c.send(ctx, UserTurn{TurnID: u.TurnID, Text: u.Text, Start: a.Start, End: a.End})
}

// backchannel stores a backchannel and tells the network (a noise only the latter).
func (c *conversation) backchannel(ctx context.Context, bc *turntaking.Backchannel) error {
	if bc.Text == "" {
		c.log.Info("noise over the agent, not stored", zap.Int("agent_turn", bc.TurnID), zap.Stringer("sound", bc.Sound))
		return c.send(ctx, UserTurn{TurnID: bc.TurnID, Backchannel: true, Sound: bc.Sound, Start: bc.Start, End: bc.End})
	}
	u := dialogue.Utterance{Speaker: dialogue.User, Text: bc.Text, TurnID: bc.TurnID, Backchannel: true}
	u.Start, u.End = c.span(bc.Start, bc.End)
	if err := c.m.store.AppendUtterance(ctx, u); err != nil {
		return fmt.Errorf("manager: storing a backchannel during turn %d: %w", bc.TurnID, err)
	}
	c.log.Info("backchannel", zap.Int("agent_turn", bc.TurnID), zap.String("text", bc.Text), zap.Stringer("sound", bc.Sound))
	return c.send(ctx, UserTurn{TurnID: bc.TurnID, Text: bc.Text, Backchannel: true, Sound: bc.Sound, Start: bc.Start, End: bc.End})
}

// span returns the clock times of a span on the session's timeline, for the history;
// an empty span at the timeline's start is an agent turn nobody heard, and has none.
func (c *conversation) span(start, end time.Duration) (time.Time, time.Time) {
	if start == 0 && end == 0 {
		return time.Time{}, time.Time{}
	}
	return c.at(start), c.at(end)
}
