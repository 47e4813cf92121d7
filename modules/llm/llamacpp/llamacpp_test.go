package llamacpp_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

func TestMain(m *testing.M) {
	llama.SetLogger(llama.LogNone, nil)
	os.Exit(m.Run())
}

// loadStories loads stories260K once per test; engines made from it share it.
func loadStories(t testing.TB) *llama.Model {
	t.Helper()
	m, err := llama.LoadModel(llmtest.StoriesPath(t), llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newEngine(t testing.TB, m *llama.Model, cfg llamacpp.Config) *llamacpp.Engine {
	t.Helper()
	if cfg.Context.Threads == 0 {
		cfg.Context.Threads = 1
	}
	e, err := llamacpp.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// fresh returns what a new engine without a cache generates for req.
func fresh(t testing.TB, m *llama.Model, req llm.Request) llm.Result {
	t.Helper()
	e := newEngine(t, m, llamacpp.Config{NoPrefixCache: true})
	_, res := llmtest.Collect(t, e, req)
	return res
}

// TestLlamaEngineMatchesLlamaSimple is the acceptance test of the in-process engine:
// greedy generation gives exactly the text Debian's llama-simple prints for the same
// prompt and number of tokens.
func TestLlamaEngineMatchesLlamaSimple(t *testing.T) {
	tool := testenv.Command(t, "llama-simple", testenv.EnvFix)
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	for _, tc := range []struct {
		prompt string
		n      int
	}{
		{"Once upon a time", 32},
		{"Once upon a time", 128},
		{"The little dog", 64},
		{"Tom and Sue found a big red ball in the garden. They", 200},
	} {
		_, res := llmtest.Collect(t, e, llm.Request{Prompt: tc.prompt, MaxTokens: tc.n})
		out := runTool(t, tool, "-m", llmtest.StoriesPath(t), "-n", strconv.Itoa(tc.n), tc.prompt)
		// llama-simple prints the prompt's pieces (with <s>), the generated pieces and a newline.
		want, ok := strings.CutPrefix(strings.TrimSuffix(out, "\n"), "<s> "+tc.prompt)
		if !ok {
			t.Fatalf("llama-simple output %q does not start with the prompt", out)
		}
		if res.Text != want {
			t.Errorf("prompt %q, %d tokens:\nengine:       %q\nllama-simple: %q", tc.prompt, tc.n, res.Text, want)
		}
		if res.StopReason == llm.StopLength && res.Tokens != tc.n {
			t.Errorf("stopped for length after %d tokens, want %d", res.Tokens, tc.n)
		}
	}
}

func runTool(t testing.TB, tool string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(tool, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\n%s", tool, args, err, llmtest.Tail(stderr.String(), 2000))
	}
	return stdout.String()
}

func TestLlamaEnginePrefixReuse(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	first := llm.Request{Prompt: "Once upon a time, there was a dog named Max.", MaxTokens: 24}
	_, r1 := llmtest.Collect(t, e, first)
	if r1.CachedTokens != 0 {
		t.Errorf("first generation reused %d tokens", r1.CachedTokens)
	}
	firstTokens, _ := m.CountTokens(first.Prompt)
	if r1.PromptTokens != firstTokens {
		t.Errorf("PromptTokens = %d, want %d", r1.PromptTokens, firstTokens)
	}

	tests := []struct {
		name      string
		prompt    string
		minCached int
	}{
		// The dialogue continues: the previous prompt and reply are a prefix.
		{"append", first.Prompt + r1.Text + " Max said hello to Lily.", firstTokens + 10},
		// The same prompt again: everything but the last token is reused.
		{"repeat", first.Prompt + r1.Text + " Max said hello to Lily.", firstTokens + 20},
		// An edit in the middle: only the part before it is reused.
		{"edit", "Once upon a time, there was a cat named Tom.", 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := llm.Request{Prompt: tc.prompt, MaxTokens: 24}
			_, got := llmtest.Collect(t, e, req)
			want := fresh(t, m, req)
			if got.CachedTokens < tc.minCached || got.CachedTokens >= got.PromptTokens {
				t.Errorf("CachedTokens = %d of %d, want at least %d", got.CachedTokens, got.PromptTokens, tc.minCached)
			}
			if got.Text != want.Text {
				t.Errorf("with the cache: %q\nwithout:        %q", got.Text, want.Text)
			}
		})
	}
	if err := e.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, r := llmtest.Collect(t, e, first); r.CachedTokens != 0 || r.Text != r1.Text {
		t.Errorf("after Reset: cached %d, text %q (want %q)", r.CachedTokens, r.Text, r1.Text)
	}
}

// TestLlamaEngineCancel: after cancellation no piece is emitted, the result says
// cancelled, and the engine generates the same as a fresh one afterwards.
func TestLlamaEngineCancel(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	req := llm.Request{Prompt: "Once upon a time", MaxTokens: 100}
	want := fresh(t, m, req)

	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var pieces []string
		var afterCancel int
		res, err := e.Generate(ctx, req, func(p string) error {
			if ctx.Err() != nil {
				afterCancel++
			}
			pieces = append(pieces, p)
			if len(pieces) == 5 {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) || res.StopReason != llm.StopCancelled {
			t.Fatalf("err = %v, StopReason = %q", err, res.StopReason)
		}
		if afterCancel != 0 || len(pieces) != 5 {
			t.Errorf("%d pieces, %d after cancel", len(pieces), afterCancel)
		}
		if res.Text != strings.Join(pieces, "") || !strings.HasPrefix(want.Text, res.Text) {
			t.Errorf("partial text %q (pieces %q, full %q)", res.Text, pieces, want.Text)
		}
	})
	t.Run("emit error", func(t *testing.T) {
		errStop := errors.New("listener gone")
		n := 0
		res, err := e.Generate(context.Background(), req, func(string) error {
			n++
			if n == 3 {
				return errStop
			}
			if n > 3 {
				t.Error("emit called after it returned an error")
			}
			return nil
		})
		if !errors.Is(err, errStop) || res.StopReason != llm.StopCancelled {
			t.Errorf("err = %v, StopReason %q", err, res.StopReason)
		}
	})
	t.Run("during prompt evaluation", func(t *testing.T) {
		long := llm.Request{Prompt: strings.Repeat("The cat sat on the mat and looked at the sun. ", 25), MaxTokens: 10}
		var aborted bool
		for i := 0; i < 20 && !aborted; i++ {
			e.Reset(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*200*time.Microsecond)
			res, err := e.Generate(ctx, long, func(string) error { return nil })
			cancel()
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) || res.StopReason != llm.StopCancelled {
					t.Fatalf("err = %v, StopReason %q", err, res.StopReason)
				}
				aborted = aborted || res.Tokens == 0
			}
		}
		if !aborted {
			t.Log("no prompt evaluation was cancelled mid-way (machine too fast for the timeouts)")
		}
		// Whatever part of the prompt stayed cached, the next generation is right.
		_, got := llmtest.Collect(t, e, long)
		if want := fresh(t, m, long); got.Text != want.Text {
			t.Errorf("after cancelled prompt evaluations: %q, want %q", got.Text, want.Text)
		}
	})
	t.Run("reusable", func(t *testing.T) {
		_, got := llmtest.Collect(t, e, req)
		if got.Text != want.Text {
			t.Errorf("after cancellations: %q\nwant %q", got.Text, want.Text)
		}
	})
	t.Run("cancelled before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := e.Generate(ctx, req, func(string) error {
			t.Error("emit called")
			return nil
		})
		if !errors.Is(err, context.Canceled) || res.StopReason != llm.StopCancelled {
			t.Errorf("err = %v, StopReason %q", err, res.StopReason)
		}
	})
}

func TestLlamaEngineStops(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	base := llm.Request{Prompt: "Once upon a time", MaxTokens: 60}
	full := fresh(t, m, base).Text
	i := strings.Index(full, "Lily")
	if i < 0 {
		t.Fatalf("test assumes the story mentions Lily: %q", full)
	}
	for _, tc := range []struct {
		name string
		stop []string
		want string
	}{
		{"word", []string{"Lily"}, full[:i]},
		{"spanning tokens", []string{"girl named L"}, full[:strings.Index(full, "girl named L")]},
		{"never appears", []string{"spaceship"}, full},
		{"two stops, first wins", []string{"named", "little"}, full[:strings.Index(full, "little")]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := base
			req.Stop = tc.stop
			pieces, res := llmtest.Collect(t, e, req)
			if res.Text != tc.want {
				t.Errorf("text %q, want %q", res.Text, tc.want)
			}
			for _, s := range tc.stop {
				if strings.Contains(strings.Join(pieces, ""), s) {
					t.Errorf("stop %q was emitted", s)
				}
			}
			wantReason := llm.StopString
			if tc.want == full {
				wantReason = llm.StopLength
			}
			if res.StopReason != wantReason {
				t.Errorf("StopReason %q, want %q", res.StopReason, wantReason)
			}
		})
	}
}

func TestLlamaEngineLimits(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{Context: llama.ContextParams{NCtx: 256}})
	n := e.ContextSize()
	_, res := llmtest.Collect(t, e, llm.Request{Prompt: "Once upon a time"})
	if res.StopReason != llm.StopEOG && res.StopReason != llm.StopLength {
		t.Errorf("StopReason %q", res.StopReason)
	}
	if res.PromptTokens+res.Tokens > n {
		t.Errorf("%d prompt + %d generated tokens exceed the context of %d", res.PromptTokens, res.Tokens, n)
	}
	t.Logf("unlimited generation: %d tokens, stop %q, %.0f tokens/s", res.Tokens, res.StopReason, res.TokensPerSecond)

	_, err := e.Generate(context.Background(), llm.Request{Prompt: strings.Repeat("The dog ran. ", 200)}, func(string) error { return nil })
	if !errors.Is(err, llm.ErrPromptTooLong) {
		t.Errorf("overlong prompt: %v", err)
	}
	// The engine still works after a rejected prompt.
	if _, res := llmtest.Collect(t, e, llm.Request{Prompt: "Once upon a time", MaxTokens: 5}); res.Tokens != 5 {
		t.Errorf("after a rejected prompt: %d tokens", res.Tokens)
	}
}

func TestLlamaEngineSampling(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	req := llm.Request{Prompt: "Once upon a time", MaxTokens: 40, Sampling: llm.Sampling{Temperature: 1.2, TopK: 40, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1.1, Seed: 99}}
	_, a := llmtest.Collect(t, e, req)
	_, b := llmtest.Collect(t, e, req)
	if a.Text != b.Text {
		t.Errorf("same seed, different text:\n%q\n%q", a.Text, b.Text)
	}
	req.Sampling.Seed = 100
	_, c := llmtest.Collect(t, e, req)
	greedy := fresh(t, m, llm.Request{Prompt: req.Prompt, MaxTokens: 40})
	if c.Text == a.Text && a.Text == greedy.Text {
		t.Errorf("sampling at temperature 1.2 gave the greedy text for two seeds")
	}
}

func TestLlamaEngineConcurrentGenerate(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	prompts := []string{"Once upon a time", "The little dog", "Lily had a red ball", "Tom was sad"}
	want := make([]string, len(prompts))
	for i, p := range prompts {
		want[i] = fresh(t, m, llm.Request{Prompt: p, MaxTokens: 30}).Text
	}
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				var sb strings.Builder
				res, err := e.Generate(context.Background(), llm.Request{Prompt: p, MaxTokens: 30}, func(s string) error {
					sb.WriteString(s)
					return nil
				})
				if err != nil || res.Text != want[i] || sb.String() != want[i] {
					t.Errorf("%q: %q, %v; want %q", p, res.Text, err, want[i])
				}
			}
		}()
	}
	wg.Wait()
}

func TestLlamaEngineSession(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	_, r1 := llmtest.Collect(t, e, llm.Request{Prompt: "Once upon a time, there was a big bear.", MaxTokens: 30})
	path := filepath.Join(t.TempDir(), "session.kv")
	if err := e.SaveSession(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	next := llm.Request{Prompt: "Once upon a time, there was a big bear." + r1.Text + " The bear", MaxTokens: 20}

	e2 := newEngine(t, m, llamacpp.Config{})
	if err := e2.LoadSession(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	if e2.CachedTokens() != e.CachedTokens() {
		t.Errorf("restored %d cached tokens, saved %d", e2.CachedTokens(), e.CachedTokens())
	}
	_, got := llmtest.Collect(t, e2, next)
	if got.CachedTokens < r1.PromptTokens {
		t.Errorf("after LoadSession only %d tokens were reused", got.CachedTokens)
	}
	if want := fresh(t, m, next); got.Text != want.Text {
		t.Errorf("after LoadSession: %q, want %q", got.Text, want.Text)
	}
	if err := e2.LoadSession(context.Background(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("loading a missing session succeeded")
	}
}

func TestLlamaEngineClose(t *testing.T) {
	m := loadStories(t)
	e, err := llamacpp.New(m, llamacpp.Config{Context: llama.ContextParams{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := e.Generate(context.Background(), llm.Request{Prompt: "Once upon a time"}, func(string) error {
			once.Do(func() { close(started) })
			return nil
		})
		done <- err
	}()
	<-started
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("generation interrupted by Close: %v", err)
	}
	if _, err := e.Generate(context.Background(), llm.Request{Prompt: "x"}, func(string) error { return nil }); !errors.Is(err, llm.ErrClosed) {
		t.Errorf("Generate after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The model belongs to the caller and still works.
	if _, err := m.CountTokens("still open"); err != nil {
		t.Error(err)
	}

	// An engine that loaded its own model closes it.
	own, err := llamacpp.Open(llmtest.StoriesPath(t), llamacpp.Config{Context: llama.ContextParams{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tok := own.Tokenizer()
	if n, err := tok.CountTokens("Once upon a time"); err != nil || n != 5 {
		t.Errorf("CountTokens = %d, %v; want 5", n, err)
	}
	own.Close()
	if _, err := tok.CountTokens("x"); !errors.Is(err, llama.ErrClosed) {
		t.Errorf("tokenizer of a closed engine: %v", err)
	}
	if _, err := llamacpp.Open(filepath.Join(t.TempDir(), "none.gguf"), llamacpp.Config{}); err == nil {
		t.Error("opening a missing model succeeded")
	}
}

// TestLlamaEnginePrefillIsExact is the acceptance test of incremental input: a reply
// generated after the user's turn was fed word by word (with a recogniser's revision
// rolled back on the way) is token-identical to a reply generated from the whole prompt
// evaluated at once, and at the end of the turn only the closing tokens are evaluated.
// The closing is fed after each step, the way the LLM module does: by a second Prefill,
// or in the words' batch (PrefillClosing), which must estimate what Prefill does and
// leave nothing for the reply to evaluate.
func TestLlamaEnginePrefillIsExact(t *testing.T) {
	m := loadStories(t)
	closing := "\nStoryteller:"
	turns := [][]string{
		// what the recogniser said, step by step: each line is the turn so far
		{"where", "where is", "where is the dog", "where is the", "where is the big", "where is the big park"},
		{"tell", "tell me", "tell me a", "tell me a story"},
	}
	for _, oneBatch := range []bool{false, true} {
		history := "Once upon a time, there was a little girl named Lily. She liked to play.\nChild: "
		e := newEngine(t, m, llamacpp.Config{})
		alone := newEngine(t, m, llamacpp.Config{})
		ctx := context.Background()
		for _, steps := range turns {
			for _, text := range steps {
				var res llm.PrefillResult
				var err error
				if oneBatch {
					res, err = e.PrefillClosing(ctx, history+text, []string{closing}, closing)
				} else if res, err = e.Prefill(ctx, history+text, []string{closing}); err == nil {
					_, err = e.Prefill(ctx, history+text+closing, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Next < 0 || res.Next > 1 {
					t.Fatalf("Prefill(%q): probability of the closing %v", text, res.Next)
				}
				if res.Cached == 0 && text != steps[0] {
					t.Errorf("Prefill(%q) reused nothing from the previous words", text)
				}
				want, err := alone.Prefill(ctx, history+text, []string{closing})
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(res.Next-want.Next) > 1e-3*want.Next {
					t.Errorf("one batch %v, %q: probability of the closing %v, %v evaluated alone", oneBatch, text, res.Next, want.Next)
				}
			}
			final := steps[len(steps)-1]
			req := llm.Request{Prompt: history + final + closing, MaxTokens: 40}
			_, got := llmtest.Collect(t, e, req)
			want := fresh(t, m, req)
			if got.Text != want.Text {
				t.Fatalf("one batch %v: reply after incremental input %q\nwant (whole prompt at once) %q", oneBatch, got.Text, want.Text)
			}
			if got.CachedTokens != got.PromptTokens {
				t.Errorf("one batch %v: the end of the turn evaluated %d tokens; the closing was fed already",
					oneBatch, got.PromptTokens-got.CachedTokens)
			}
			history = history + final + closing + got.Text + "\nChild: "
		}
	}
}

func TestLlamaEnginePrefillProbability(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	ctx := context.Background()
	// The same text twice: the second call evaluates nothing and gives the same answer.
	a, err := e.Prefill(ctx, "Once upon a time, there was a little girl", []string{"."})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Prefill(ctx, "Once upon a time, there was a little girl", []string{"."})
	if err != nil {
		t.Fatal(err)
	}
	if a.Next != b.Next || b.Cached != b.Tokens {
		t.Fatalf("repeated prefill: %+v then %+v", a, b)
	}
	// Without a next text there is no probability.
	c, err := e.Prefill(ctx, "Once upon a time", nil)
	if err != nil || c.Next != -1 {
		t.Fatalf("Prefill without next = %+v, %v", c, err)
	}
	// A full-context prompt is refused; a cancelled context stops it.
	long := strings.Repeat("Lily and Tom play in the park. ", 400)
	if _, err := e.Prefill(ctx, long, nil); !errors.Is(err, llm.ErrPromptTooLong) {
		t.Fatalf("too long prompt: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Prefill(cctx, "Once upon a time", nil); err == nil {
		t.Fatal("prefill on a cancelled context succeeded")
	}
	// After a Generate the engine goes on prefilling from what it holds.
	if _, err := e.Generate(ctx, llm.Request{Prompt: "Once upon a time", MaxTokens: 5}, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	d, err := e.Prefill(ctx, "Once upon a time, there was", nil)
	if err != nil || d.Cached == 0 {
		t.Fatalf("prefill after generate = %+v, %v", d, err)
	}
}

// TestLlamaEnginePauseContinue: a generation its consumer pauses (llm.ErrPause) goes on
// with Continue exactly as if it had not paused — greedy and sampled, paused once or
// several times — and anything else the engine does in between drops it.
func TestLlamaEnginePauseContinue(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	for _, sampling := range []llm.Sampling{{}, {Temperature: 1.2, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, Seed: 7}} {
		req := llm.Request{Prompt: "Once upon a time", MaxTokens: 30, Sampling: sampling, Stop: []string{"Lily said"}}
		want := fresh(t, m, req)
		for _, every := range []int{1, 4, 29} {
			e := newEngine(t, m, llamacpp.Config{})
			var text strings.Builder
			n := 0
			emit := func(piece string) error {
				text.WriteString(piece)
				if n++; n%every == 0 {
					return llm.ErrPause
				}
				return nil
			}
			res, err := e.Generate(ctx, req, emit)
			pauses := 0
			for err == nil && res.StopReason == llm.StopPaused {
				pauses++
				res, err = e.Continue(ctx, emit)
			}
			if err != nil {
				t.Fatal(err)
			}
			if text.String() != want.Text || res.Text != want.Text || res.Tokens != want.Tokens || res.StopReason != want.StopReason {
				t.Errorf("temperature %g, a pause every %d pieces (%d pauses): %q (%d tokens, %s), want %q (%d, %s)",
					sampling.Temperature, every, pauses, res.Text, res.Tokens, res.StopReason, want.Text, want.Tokens, want.StopReason)
			}
			if every == 1 && pauses < 10 {
				t.Errorf("a pause at every piece paused %d times", pauses)
			}
		}
	}
	e := newEngine(t, m, llamacpp.Config{})
	res, err := e.Generate(ctx, llm.Request{Prompt: "Once upon a time", MaxTokens: 20}, func(string) error { return llm.ErrPause })
	if err != nil || res.StopReason != llm.StopPaused {
		t.Fatalf("paused generation: %v, %v", res.StopReason, err)
	}
	if _, err := e.Prefill(ctx, "Once upon a time there", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Continue(ctx, func(string) error { return nil }); !errors.Is(err, llm.ErrNothingPaused) {
		t.Errorf("Continue after a Prefill: %v, want ErrNothingPaused", err)
	}
	if _, err := e.Continue(ctx, func(string) error { return nil }); !errors.Is(err, llm.ErrNothingPaused) {
		t.Errorf("Continue without a pause: %v, want ErrNothingPaused", err)
	}
}

// TestLlamaEngineRefusesContextBeyondTraining: a context longer than stories260K was
// trained on is refused before llama.cpp is asked to allocate it, with the model's limit.
func TestLlamaEngineRefusesContextBeyondTraining(t *testing.T) {
	m := loadStories(t)
	train := m.ContextTrainSize()
	if m.Shape().KVBytesPerToken() <= 0 {
		t.Fatalf("no KV estimate from the shape %+v", m.Shape())
	}
	_, err := llamacpp.New(m, llamacpp.Config{Context: llama.ContextParams{NCtx: 2000000000, Threads: 1}})
	var ce *llamacpp.ContextError
	if !errors.As(err, &ce) || ce.Max != train || !strings.Contains(err.Error(), "more than the model was trained on (want 1–"+strconv.Itoa(train)) {
		t.Fatalf("a context of 2e9 tokens: %v", err)
	}
	if err := llamacpp.CheckContext(m, train, 1); err != nil {
		t.Errorf("the training context itself: %v", err)
	}
}
