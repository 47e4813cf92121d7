package llamacpp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// TestModuleCutReplyDropsStopFragment is the regression test of a reply spoken as
// "…your children. Ch": the token limit ended the generation in the middle of a stop
// string ("Child:", the next turn's cue), and the held-back fragment of it was spoken.
// Here stories260K's story is cut by max_tokens right after the first token of its
// second sentence, which begins a stop string; the reply must end with the first
// sentence, in its clauses (the audio) and its spoken text (the history) alike.
func TestModuleCutReplyDropsStopFragment(t *testing.T) {
	m := loadStories(t)
	const prompt = "Once upon a time"
	pieces, full := llmtest.Collect(t, newEngine(t, m, llamacpp.Config{NoPrefixCache: true}), llm.Request{Prompt: prompt, MaxTokens: 80})
	if len(pieces) != full.Tokens {
		t.Fatalf("%d pieces for %d tokens: the test needs a piece per token", len(pieces), full.Tokens)
	}
	// The first sentence end followed by two word pieces: the stop string is those two,
	// and the limit falls after the first of them.
	k := -1
	for i := 0; i+2 < len(pieces); i++ {
		if strings.HasSuffix(strings.TrimSpace(strings.Join(pieces[:i+1], "")), ".") && strings.TrimSpace(pieces[i+1]) != "" && strings.TrimSpace(pieces[i+2]) != "" {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatalf("no sentence end followed by two word pieces in %q", full.Text)
	}
	sentence := strings.TrimSpace(strings.Join(pieces[:k+1], ""))
	stop := pieces[k+1] + pieces[k+2]
	fragment := strings.TrimSpace(pieces[k+1])
	t.Logf("reply cut after %q; stop %q; fragment %q", sentence, stop, fragment)

	e := newEngine(t, m, llamacpp.Config{})
	pb := llmtest.NewPrompts(map[int]string{1: prompt}, stop)
	mod := llm.NewModule("llm", e, pb, llm.Config{MaxTokens: k + 2, Clauses: llm.ClauseConfig{MinWords: 1}})
	c := llmtest.RunNetwork(t, nil, mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := c.Send(ctx, control.Respond, 1); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(1))
	})
	r := c.Replies[0]
	if r.Result.StopReason != llm.StopLength {
		t.Fatalf("the generation stopped by %s, want the token limit (text %q)", r.Result.StopReason, r.Text)
	}
	if r.Spoken != sentence || strings.Join(r.Clauses, " ") != sentence {
		t.Errorf("spoken %q, clauses %q; want %q without the fragment %q", r.Spoken, r.Clauses, sentence, fragment)
	}
	committed, _ := llmtest.ClauseStory(t, c.Ups, 1)
	for _, cl := range committed {
		if strings.Contains(cl, fragment) && !strings.Contains(sentence, fragment) {
			t.Errorf("committed clause %q holds the stop string's fragment %q", cl, fragment)
		}
	}
}
