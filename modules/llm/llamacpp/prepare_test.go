package llamacpp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	dlg "github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// storyStore is a dialogue history in the plain format over stories260K's tokenizer.
func storyStore(t *testing.T, tok dlg.Tokenizer) *dlg.Store {
	t.Helper()
	return plainStore(t, tok, "A storyteller talks with a child.", "Child", "Storyteller")
}

// plainStore is a dialogue history in the plain format with the given system prompt and roles.
func plainStore(t *testing.T, tok dlg.Tokenizer, system, userRole, agentRole string) *dlg.Store {
	t.Helper()
	f, err := dlg.LoadFormat("plain")
	if err != nil {
		t.Fatal(err)
	}
	f = f.WithRoles(userRole, agentRole)
	s, err := dlg.NewStore(context.Background(), dlg.NewHistory(f, system), nil,
		dlg.StoreConfig{Tokenizer: tok, ContextSize: 512, ReplyReserve: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// send sends one control command.
func send(ctx context.Context, c *llmtest.Controller, cmd control.Command) error {
	u := c.Ports.NewIU(cmd)
	return c.Ports.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

// TestModulePreparesTurns is the LLM side of speculative replies: the user's words are
// fed while they speak (turn-completion estimates come back), a turn prepared from them
// stays tentative (prepared clauses, never committed, no reply) until confirmed, and is
// then exactly the reply a normal turn would have been; a withdrawn turn revokes every
// clause it produced.
func TestModulePreparesTurns(t *testing.T) {
	m := loadStories(t)
	preparesTurns(t, newEngine(t, m, llamacpp.Config{}), m)
}

// TestModulePreparesTurnsWithLlamaServer is TestModulePreparesTurns with the HTTP engine
// and a real llama-server, whose prompt cache and token probabilities stand in for the
// in-process engine's.
func TestModulePreparesTurnsWithLlamaServer(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	preparesTurns(t, llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL}), loadStories(t))
}

func preparesTurns(t *testing.T, e llm.Engine, m dlg.Tokenizer) {
	t.Helper()
	store := storyStore(t, m)
	mod := llm.NewModule("llm", e, store, llm.Config{MaxTokens: 30, Prefill: true})
	words := []string{"tell", "me", "a", "story"}
	c := llmtest.RunNetwork(t, clock.NewVirtual(time.Unix(1000, 0)), mod, func(ctx context.Context, c *llmtest.Controller) error {
		// The recogniser's words arrive one by one.
		for i, w := range words {
			u := c.Ports.NewIU(asr.Word{Text: w, Utterance: 1, Stability: 1})
			if err := c.Ports.Send(ctx, iu.AddOf(u)); err != nil {
				return err
			}
			want := strings.Join(words[:i+1], " ")
			if err := c.Until(ctx, func(up iu.Update) bool {
				tc, ok := up.IU.Payload.(llm.TurnCompletion)
				return ok && tc.Text == want
			}); err != nil {
				return err
			}
		}
		text := strings.Join(words, " ")
		if err := send(ctx, c, control.Command{Action: control.Prepare, TurnID: 2, Text: text}); err != nil {
			return err
		}
		// Wait until the prepared generation has a complete clause; the rest comes
		// after the confirmation.
		if err := c.Until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(llm.Clause)
			return ok && cl.TurnID == 2 && cl.Prepared
		}); err != nil {
			return err
		}
		// The user's turn ends with the same words: the recogniser says so, the manager
		// stores it and responds.
		u := c.Ports.NewIU(asr.Utterance{ID: 1, Text: text})
		if err := c.Ports.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
			return err
		}
		if err := store.AppendUtterance(ctx, dlg.Utterance{Speaker: dlg.User, TurnID: 1, Text: text}); err != nil {
			return err
		}
		if err := send(ctx, c, control.Command{Action: control.Respond, TurnID: 2}); err != nil {
			return err
		}
		if err := c.Until(ctx, llmtest.ReplyOf(2)); err != nil {
			return err
		}
		if err := store.AppendUtterance(ctx, dlg.Utterance{Speaker: dlg.Agent, TurnID: 2, Text: c.Replies[0].Spoken}); err != nil {
			return err
		}
		// A second prepared turn that the user's next words make wrong.
		if err := send(ctx, c, control.Command{Action: control.Prepare, TurnID: 4, Text: "and then"}); err != nil {
			return err
		}
		if err := c.Until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(llm.Clause)
			return ok && cl.TurnID == 4 && cl.Prepared
		}); err != nil {
			return err
		}
		if err := send(ctx, c, control.Command{Action: control.Withdraw, TurnID: 4}); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.WithdrawnReplyOf(4))
	})
	if len(c.Replies) != 2 {
		t.Fatalf("%d replies, want 2", len(c.Replies))
	}
	confirmed, withdrawn := c.Replies[0], c.Replies[1]
	if !confirmed.Prepared || confirmed.Withdrawn || confirmed.Interrupted {
		t.Errorf("confirmed reply: %+v", confirmed)
	}
	committed, revoked := llmtest.ClauseStory(t, c.Ups, 2)
	if revoked > 1 || len(committed) == 0 {
		t.Errorf("turn 2: %d committed, %d revoked", len(committed), revoked)
	}
	// Nothing of turn 2 was committed before the Respond: its clauses were prepared.
	for _, up := range c.Ups {
		if r, ok := up.IU.Payload.(llm.Reply); ok && r.TurnID == 2 {
			break
		}
		if cl, ok := up.IU.Payload.(llm.Clause); ok && cl.TurnID == 2 && up.Type == iu.Commit && !cl.Prepared {
			t.Errorf("clause %q committed without being prepared", cl.Text)
		}
	}
	if !withdrawn.Withdrawn || withdrawn.Prepared {
		t.Errorf("withdrawn reply: %+v", withdrawn)
	}
	committed4, revoked4 := llmtest.ClauseStory(t, c.Ups, 4)
	if len(committed4) != 0 || revoked4 == 0 {
		t.Errorf("withdrawn turn 4: committed %q, revoked %d", committed4, revoked4)
	}
	completions := 0
	for _, up := range c.Ups {
		if tc, ok := up.IU.Payload.(llm.TurnCompletion); ok && up.Type == iu.Add {
			completions++
			if tc.P < 0 || tc.P > 1 || tc.Utterance != 1 {
				t.Errorf("turn completion %+v", tc)
			}
			if tc.Text != "tell" && tc.Evaluated > 3 {
				t.Errorf("prefill of %q evaluated %d tokens: the earlier words were not reused", tc.Text, tc.Evaluated)
			}
		}
	}
	if completions != len(words) {
		t.Errorf("%d turn completions for %d words", completions, len(words))
	}
}

// TestPreparedReplyEqualsNormalReply: greedy, the reply of a prepared and confirmed turn
// is token for token the reply the same turn gets when generated after the end of the
// turn from the whole prompt at once — also when the preparation paused after its
// first clause (nothing more is generated until the confirmation) and went on after it.
func TestPreparedReplyEqualsNormalReply(t *testing.T) {
	m := loadStories(t)
	text := "where is the big dog"
	preparedBeforeRespond := 0
	run := func(prepare, wait bool) llm.Reply {
		e := newEngine(t, m, llamacpp.Config{})
		store := storyStore(t, m)
		mod := llm.NewModule("llm", e, store, llm.Config{MaxTokens: 40, Prefill: true})
		c := llmtest.RunNetwork(t, clock.NewVirtual(time.Unix(1000, 0)), mod, func(ctx context.Context, c *llmtest.Controller) error {
			if prepare {
				for _, w := range strings.Fields(text) {
					u := c.Ports.NewIU(asr.Word{Text: w, Utterance: 1, Stability: 1})
					if err := c.Ports.Send(ctx, iu.AddOf(u)); err != nil {
						return err
					}
				}
				if err := send(ctx, c, control.Command{Action: control.Prepare, TurnID: 2, Text: text}); err != nil {
					return err
				}
			}
			if wait {
				// The user is still silent a second later: the preparation has paused
				// after its first clause.
				if err := c.Until(ctx, func(up iu.Update) bool {
					cl, ok := up.IU.Payload.(llm.Clause)
					return ok && cl.Prepared
				}); err != nil {
					return err
				}
				if err := c.Wait(ctx, time.Second); err != nil {
					return err
				}
				for _, up := range c.Ups {
					if cl, ok := up.IU.Payload.(llm.Clause); ok && cl.Prepared {
						preparedBeforeRespond++
					}
				}
			}
			if err := store.AppendUtterance(ctx, dlg.Utterance{Speaker: dlg.User, TurnID: 1, Text: text}); err != nil {
				return err
			}
			if err := send(ctx, c, control.Command{Action: control.Respond, TurnID: 2}); err != nil {
				return err
			}
			return c.Until(ctx, llmtest.ReplyOf(2))
		})
		return c.Replies[len(c.Replies)-1]
	}
	normal := run(false, false)
	for _, wait := range []bool{false, true} {
		prepared := run(true, wait)
		if !prepared.Prepared || prepared.Text != normal.Text || prepared.Result.Tokens != normal.Result.Tokens {
			t.Errorf("confirmed after a pause %v: prepared reply %q (%d tokens, prepared %v)\nnormal reply %q (%d tokens)",
				wait, prepared.Text, prepared.Result.Tokens, prepared.Prepared, normal.Text, normal.Result.Tokens)
		}
		if len(prepared.Clauses) < 2 {
			t.Errorf("the reply %q has %d clauses: want more than the first, to see the rest follow the pause", prepared.Text, len(prepared.Clauses))
		}
	}
	if preparedBeforeRespond != 1 {
		t.Errorf("%d clauses prepared before the confirmation: the preparation did not pause after its first", preparedBeforeRespond)
	}
}

// TestCompletionEstimates probes stories260K's estimate that a user's words are complete
// (the end of the user's turn or sentence punctuation comes next), as the predictive
// end-of-turn policy reads it: complete sentences must score above their unfinished
// beginnings. Run with -v for the figures docs/TURN-TAKING.md quotes.
func TestCompletionEstimates(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	store := storyStore(t, m)
	estimate := func(text string) float64 {
		p := completion(t, e, store, text)
		t.Logf("%-32q %.5f", text, p)
		return p
	}
	for _, pair := range [][2]string{
		{"what time is it", "what time is"},
		{"turn on the living room lamp", "turn on the"},
		{"tell me a story", "tell me a"},
		{"where is the dog", "where is the"},
	} {
		if complete, unfinished := estimate(pair[0]), estimate(pair[1]); complete <= unfinished {
			t.Errorf("%q scores %.5f, no more than %q (%.5f)", pair[0], complete, pair[1], unfinished)
		}
	}
	estimate("go forward ten meters")
}

// completion is the estimate the LLM module gives the end-of-turn policy after the
// user's words text: the probability that the end of the user's turn or sentence
// punctuation comes next.
func completion(t *testing.T, e *llamacpp.Engine, store *dlg.Store, text string) float64 {
	t.Helper()
	prefix, closing, _, err := store.DraftPrompt(context.Background(), 1<<30, text)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Prefill(context.Background(), prefix, llm.TurnEnds(closing))
	if err != nil {
		t.Fatal(err)
	}
	return res.Next
}

// TestPreparedTurnFollowsAHistoryChange: when the history changes between the
// preparation and the confirmation (a summary arrived, the context was fitted anew),
// the prepared reply no longer fits its prompt: the module withdraws it and generates
// the turn again from the history, exactly as a normal turn.
func TestPreparedTurnFollowsAHistoryChange(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	store := storyStore(t, m)
	text := "where is the big dog"
	mod := llm.NewModule("llm", e, store, llm.Config{MaxTokens: 20, Prefill: true})
	c := llmtest.RunNetwork(t, clock.NewVirtual(time.Unix(1000, 0)), mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := send(ctx, c, control.Command{Action: control.Prepare, TurnID: 4, Text: text}); err != nil {
			return err
		}
		if err := c.Until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(llm.Clause)
			return ok && cl.TurnID == 4 && cl.Prepared
		}); err != nil {
			return err
		}
		// Meanwhile an earlier exchange reaches the history (as a summary would change it).
		for _, u := range []dlg.Utterance{{Speaker: dlg.User, TurnID: 1, Text: "hello"}, {Speaker: dlg.Agent, TurnID: 2, Text: "Hello, Lily."},
			{Speaker: dlg.User, TurnID: 3, Text: text}} {
			if err := store.AppendUtterance(ctx, u); err != nil {
				return err
			}
		}
		if err := send(ctx, c, control.Command{Action: control.Respond, TurnID: 4}); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(4))
	})
	var final llm.Reply
	withdrawn := 0
	for _, r := range c.Replies {
		if r.Withdrawn {
			withdrawn++
		} else {
			final = r
		}
	}
	prompt, _, err := store.BuildPrompt(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := fresh(t, m, llm.Request{Prompt: prompt, MaxTokens: 20})
	if withdrawn != 1 || final.Prepared || final.Text != want.Text {
		t.Fatalf("withdrawn %d, final reply %q (prepared %v), want %q from the new history", withdrawn, final.Text, final.Prepared, want.Text)
	}
	var committed []string
	for _, up := range c.Ups {
		if cl, ok := up.IU.Payload.(llm.Clause); ok && cl.TurnID == 4 && up.Type == iu.Commit {
			committed = append(committed, cl.Text)
		}
	}
	if strings.Join(committed, " ") != final.Spoken {
		t.Errorf("committed clauses %q, spoken %q: the prepared clauses must not be spoken", committed, final.Spoken)
	}
}

// TestPausedPreparationOutlivesAPrefill: a prefill of the user's words while the
// preparation is paused (for the end-of-turn estimate) drops the engine's paused
// generation; the confirmed turn still goes on after its first clause, generated from
// the prompt and what was generated so far.
func TestPausedPreparationOutlivesAPrefill(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	store := storyStore(t, m)
	text := "where is the big dog"
	mod := llm.NewModule("llm", e, store, llm.Config{MaxTokens: 40, Prefill: true})
	var first string
	completions := 0
	c := llmtest.RunNetwork(t, clock.NewVirtual(time.Unix(1000, 0)), mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := send(ctx, c, control.Command{Action: control.Prepare, TurnID: 2, Text: text}); err != nil {
			return err
		}
		if err := c.Until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(llm.Clause)
			if ok && cl.Prepared {
				first = cl.Text
			}
			return ok && cl.Prepared
		}); err != nil {
			return err
		}
		if err := c.Wait(ctx, time.Second); err != nil {
			return err
		}
		// The recogniser's words reach the LLM now: it prefills them.
		for _, w := range strings.Fields(text) {
			u := c.Ports.NewIU(asr.Word{Text: w, Utterance: 1, Stability: 1})
			if err := c.Ports.Send(ctx, iu.AddOf(u)); err != nil {
				return err
			}
		}
		if err := c.Until(ctx, func(up iu.Update) bool {
			tc, ok := up.IU.Payload.(llm.TurnCompletion)
			if ok && tc.Text == text {
				completions++
			}
			return ok && tc.Text == text
		}); err != nil {
			return err
		}
		if err := c.Wait(ctx, time.Second); err != nil {
			return err
		}
		if err := store.AppendUtterance(ctx, dlg.Utterance{Speaker: dlg.User, TurnID: 1, Text: text}); err != nil {
			return err
		}
		if err := send(ctx, c, control.Command{Action: control.Respond, TurnID: 2}); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(2))
	})
	reply := c.Replies[len(c.Replies)-1]
	if completions != 1 {
		t.Errorf("%d turn completions for the words while the preparation was paused", completions)
	}
	if !reply.Prepared || len(reply.Clauses) < 2 || reply.Clauses[0] != first || reply.Err != "" {
		t.Errorf("reply %+v: want the prepared first clause %q and more after it", reply, first)
	}
}

// prefillRecorder is the engine, telling each prefill's prompt on seen.
type prefillRecorder struct {
	*llamacpp.Engine
	seen chan string
}

func (r prefillRecorder) PrefillClosing(ctx context.Context, prompt string, ends []string, closing string) (llm.PrefillResult, error) {
	r.seen <- prompt
	if len(ends) > 0 {
		return llm.PrefillResult{}, fmt.Errorf("prefill of %q asks for an estimate nothing reads", prompt)
	}
	return r.Engine.PrefillClosing(ctx, prompt, ends, closing)
}

// TestPrefillWithoutEstimate: when nothing reads the estimate (an end-of-turn policy on
// words), the module's prefills ask for none and it sends no TurnCompletion; the words
// and the closing are still evaluated ahead of the reply prepared at the pause.
func TestPrefillWithoutEstimate(t *testing.T) {
	m := loadStories(t)
	e := prefillRecorder{Engine: newEngine(t, m, llamacpp.Config{}), seen: make(chan string, 64)}
	store := storyStore(t, m)
	mod := llm.NewModule("llm", e, store, llm.Config{MaxTokens: 20, Prefill: true, NoEstimate: true})
	var prompts []string
	// The real clock: the script waits for the engine's prefills outside the network.
	c := llmtest.RunNetwork(t, nil, mod, func(ctx context.Context, c *llmtest.Controller) error {
		for _, w := range []string{"tell", "me", "a", "story"} {
			if err := c.Ports.Send(ctx, iu.AddOf(c.Ports.NewIU(asr.Word{Text: w, Utterance: 1, Stability: 1}))); err != nil {
				return err
			}
		}
		for len(prompts) == 0 || !strings.HasSuffix(prompts[len(prompts)-1], "tell me a story") {
			select {
			case p := <-e.seen:
				prompts = append(prompts, p)
			case <-ctx.Done():
				return fmt.Errorf("no prefill of all the words (prompts %q): %w", prompts, ctx.Err())
			}
		}
		if err := send(ctx, c, control.Command{Action: control.Prepare, TurnID: 2, Text: "tell me a story"}); err != nil {
			return err
		}
		return c.Until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(llm.Clause)
			return ok && cl.TurnID == 2 && cl.Prepared
		})
	})
	for _, up := range c.Ups {
		if tc, ok := up.IU.Payload.(llm.TurnCompletion); ok {
			t.Errorf("a turn-completion estimate nothing reads: %+v", tc)
		}
	}
}
