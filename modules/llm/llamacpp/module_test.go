package llamacpp_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// The LLM module driven by the real engines (the scripted tests are package llm's).

func TestModuleGeneratesClauses(t *testing.T) {
	m := loadStories(t)
	for _, clk := range []struct {
		name string
		c    func() clock.Clock
	}{
		{"real clock", func() clock.Clock { return nil }},
		{"virtual clock", func() clock.Clock { return clock.NewVirtual(time.Unix(1000, 0)) }},
	} {
		t.Run(clk.name, func(t *testing.T) {
			e := newEngine(t, m, llamacpp.Config{})
			first := "Once upon a time"
			pb := llmtest.NewPrompts(map[int]string{1: first})
			mod := llm.NewModule("llm", e, pb, llm.Config{MaxTokens: 60})
			c := llmtest.RunNetwork(t, clk.c(), mod, func(ctx context.Context, c *llmtest.Controller) error {
				if err := c.Send(ctx, control.Respond, 1); err != nil {
					return err
				}
				if err := c.Until(ctx, llmtest.ReplyOf(1)); err != nil {
					return err
				}
				// The next turn continues the story: the engine reuses its cache.
				pb.Set(2, first+c.Replies[0].Text+" Then")
				if err := c.Send(ctx, control.Respond, 2); err != nil {
					return err
				}
				return c.Until(ctx, llmtest.ReplyOf(2))
			})
			if len(c.Replies) != 2 {
				t.Fatalf("%d replies", len(c.Replies))
			}
			for i, r := range c.Replies {
				committed, revoked := llmtest.ClauseStory(t, c.Ups, r.TurnID)
				// The token limit cuts the story mid-clause: that unfinished clause is
				// withdrawn, and the reply ends with the last complete one, in its clauses
				// (what is spoken) and in Spoken (what the history stores) alike.
				if revoked > 1 || r.Interrupted || r.Err != "" {
					t.Errorf("turn %d: revoked %d, interrupted %v, err %q", r.TurnID, revoked, r.Interrupted, r.Err)
				}
				if len(committed) < 2 || strings.Join(committed, "|") != strings.Join(r.Clauses, "|") {
					t.Errorf("turn %d: committed %q, reply clauses %q", r.TurnID, committed, r.Clauses)
				}
				if noSpace(strings.Join(committed, "")) != noSpace(r.Spoken) || !strings.HasPrefix(noSpace(r.Text), noSpace(r.Spoken)) {
					t.Errorf("turn %d: clauses %q do not add up to the spoken reply %q (generated %q)", r.TurnID, committed, r.Spoken, r.Text)
				}
				want := fresh(t, m, llm.Request{Prompt: pb.Prompt(r.TurnID), MaxTokens: 60})
				if r.Text != want.Text || r.Result.Tokens != 60 || r.Result.StopReason != llm.StopLength {
					t.Errorf("turn %d: %q (%d tokens, %s), want %q", r.TurnID, r.Text, r.Result.Tokens, r.Result.StopReason, want.Text)
				}
				if i == 1 && r.Result.CachedTokens < c.Replies[0].Result.PromptTokens {
					t.Errorf("turn 2 reused only %d tokens", r.Result.CachedTokens)
				}
				if clk.name == "real clock" && (r.TimeToFirstToken <= 0 || r.TimeToFirstClause < r.TimeToFirstToken) {
					t.Errorf("turn %d: time to first token %v, first clause %v", r.TurnID, r.TimeToFirstToken, r.TimeToFirstClause)
				}
			}
			// The last committed clause of each turn carries Last.
			for _, up := range c.Ups {
				if cl, ok := up.IU.Payload.(llm.Clause); ok && up.Type == iu.Commit && cl.Last {
					if cl.ClauseID != len(c.Replies[cl.TurnID-1].Clauses)-1 {
						t.Errorf("Last on clause %d of turn %d", cl.ClauseID, cl.TurnID)
					}
				}
			}
		})
	}
}

// TestModuleInterrupt: Interrupt stops the turn at once, revokes the clause in progress,
// emits the interrupted reply, and nothing of that turn follows; the next turn works.
func TestModuleInterrupt(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	pb := llmtest.NewPrompts(map[int]string{1: "Once upon a time", 2: "The little dog"})
	mod := llm.NewModule("llm", e, pb, llm.Config{MaxTokens: 300})
	var interruptAt int
	c := llmtest.RunNetwork(t, nil, mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := c.Send(ctx, control.Respond, 1); err != nil {
			return err
		}
		// Interrupt as soon as the first clause is committed and the next one started.
		err := c.Until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(llm.Clause)
			return ok && up.Type == iu.Add && cl.ClauseID == 1
		})
		if err != nil {
			return err
		}
		interruptAt = len(c.Ups)
		if err := c.Send(ctx, control.Interrupt, 1); err != nil {
			return err
		}
		if err := c.Until(ctx, llmtest.ReplyOf(1)); err != nil {
			return err
		}
		if err := c.Send(ctx, control.Respond, 2); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(2))
	})
	r1 := c.Replies[0]
	if !r1.Interrupted || r1.Err != "" || r1.Result.StopReason != llm.StopCancelled {
		t.Errorf("turn 1 reply: interrupted %v, err %q, stop %q", r1.Interrupted, r1.Err, r1.Result.StopReason)
	}
	// The interrupt was sent once the second clause had started; the generation may have
	// run on a little until the module read it (this tiny model writes thousands of tokens
	// a second), but what was committed is what the reply keeps, and the clause that was
	// still open is revoked.
	committed, revoked := llmtest.ClauseStory(t, c.Ups, 1)
	if len(committed) < 1 || len(committed) != len(r1.Clauses) || revoked > 1 {
		t.Errorf("turn 1: %d committed (%q), reply keeps %d, %d revoked", len(committed), committed, len(r1.Clauses), revoked)
	}
	if full := fresh(t, m, llm.Request{Prompt: "Once upon a time", MaxTokens: 300}).Text; len(r1.Text) >= len(full) {
		t.Errorf("the interrupted reply holds the whole generation (%d bytes)", len(full))
	}
	// After the interrupt: clause updates already in flight, then the revoke and the
	// reply; nothing about turn 1 after the reply.
	replied := false
	for _, up := range c.Ups[interruptAt:] {
		if cl, ok := up.IU.Payload.(llm.Clause); ok && cl.TurnID == 1 && replied {
			t.Errorf("clause update %s %q after the interrupted reply", up.Type, cl.Text)
		}
		if llmtest.ReplyOf(1)(up) {
			replied = true
		}
	}
	if !strings.HasPrefix(fresh(t, m, llm.Request{Prompt: "Once upon a time", MaxTokens: 300}).Text, r1.Text) {
		t.Errorf("interrupted text %q is not a prefix of the full generation", r1.Text)
	}
	if r2 := c.Replies[1]; r2.Interrupted || r2.Text != fresh(t, m, llm.Request{Prompt: "The little dog", MaxTokens: 300}).Text {
		t.Errorf("turn 2 after the interrupt: %+v", r2)
	}
}

// TestModuleStopPatterns: the prompt builder's stop strings cut the reply; the cut text
// is never spoken.
func TestModuleStopPatterns(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	full := fresh(t, m, llm.Request{Prompt: "Once upon a time", MaxTokens: 80}).Text
	cut := strings.Index(full, "Lily")
	if cut < 0 {
		t.Fatalf("test assumes the story mentions Lily: %q", full)
	}
	pb := llmtest.NewPrompts(map[int]string{1: "Once upon a time"}, "Lily")
	mod := llm.NewModule("llm", e, pb, llm.Config{MaxTokens: 80, Clauses: llm.ClauseConfig{MinWords: 1}})
	c := llmtest.RunNetwork(t, nil, mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := c.Send(ctx, control.Respond, 1); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(1))
	})
	r := c.Replies[0]
	if r.Text != full[:cut] || r.Result.StopReason != llm.StopString {
		t.Errorf("reply %q (%s), want %q", r.Text, r.Result.StopReason, full[:cut])
	}
	for _, up := range c.Ups {
		if cl, ok := up.IU.Payload.(llm.Clause); ok && strings.Contains(cl.Text, "Lily") {
			t.Errorf("clause %q contains the stop string", cl.Text)
		}
	}
}

// killAfter wraps an engine and kills a llama-server after n pieces of one generation,
// the way a crash would hit a real conversation.
type killAfter struct {
	llm.Engine
	srv *llmtest.LlamaServer
	n   int
}

func (k killAfter) Generate(ctx context.Context, req llm.Request, emit func(string) error) (llm.Result, error) {
	count := 0
	return k.Engine.Generate(ctx, req, func(p string) error {
		count++
		if count == k.n {
			k.srv.Kill()
		}
		return emit(p)
	})
}

// TestModuleServerDiesMidStream: llama-server is killed while it streams a reply; the
// module ends the turn with the error in the reply and serves the next turn once a
// server is back.
func TestModuleServerDiesMidStream(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	httpEngine := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, ConnectRetries: 20, RetryDelay: 50 * time.Millisecond})
	pb := llmtest.NewPrompts(map[int]string{1: "Once upon a time", 2: "The little dog"})
	mod := llm.NewModule("llm", killAfter{Engine: httpEngine, srv: srv, n: 40}, pb, llm.Config{MaxTokens: 200})
	c := llmtest.RunNetwork(t, nil, mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := c.Send(ctx, control.Respond, 1); err != nil {
			return err
		}
		if err := c.Until(ctx, llmtest.ReplyOf(1)); err != nil {
			return err
		}
		// The server comes back on the same port; the engine's connect retries find it.
		llmtest.StartLlamaServer(t, srv.Port)
		if err := c.Send(ctx, control.Respond, 2); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(2))
	})
	r1 := c.Replies[0]
	if r1.Err == "" || !strings.Contains(r1.Err, "stream ended") || r1.Interrupted {
		t.Errorf("turn 1: err %q, interrupted %v", r1.Err, r1.Interrupted)
	}
	if r1.Text == "" || !strings.HasPrefix(fresh(t, loadStories(t), llm.Request{Prompt: "Once upon a time", MaxTokens: 200}).Text, r1.Text) {
		t.Errorf("turn 1 partial text %q", r1.Text)
	}
	committed, _ := llmtest.ClauseStory(t, c.Ups, 1)
	for _, cl := range committed {
		if !strings.Contains(r1.Text, cl) {
			t.Errorf("committed clause %q is not in the reply", cl)
		}
	}
	t.Logf("turn 1 ended with: %s; %d clauses committed", r1.Err, len(committed))
	if r2 := c.Replies[1]; r2.Err != "" || r2.Text == "" || r2.Result.Tokens != 200 {
		t.Errorf("turn 2 after the restart: err %q, %d tokens", r2.Err, r2.Result.Tokens)
	}
}

func noSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}
