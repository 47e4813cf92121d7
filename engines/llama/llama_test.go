package llama

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/internal/testenv"
)

func TestMain(m *testing.M) {
	SetLogger(LogNone, nil)
	os.Exit(m.Run())
}

func storiesModel(t testing.TB) *Model {
	t.Helper()
	m, err := LoadModel(testenv.SharedFile(t, "models/stories260K.gguf"), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newContext(t testing.TB, m *Model, p ContextParams) *Context {
	t.Helper()
	c, err := NewContext(m, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// greedy generates n tokens after prompt with a fresh context and a greedy sampler.
func greedy(t testing.TB, m *Model, prompt string, n int) []Token {
	t.Helper()
	c := newContext(t, m, ContextParams{Threads: 1})
	s, err := NewSampler(SamplerParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toks, err := m.Tokenize(prompt, true, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.DecodeTokens(ctx, 0, 0, toks); err != nil {
		t.Fatal(err)
	}
	pos := len(toks)
	var out []Token
	for len(out) < n {
		tok, err := s.Sample(c, -1)
		if err != nil {
			t.Fatal(err)
		}
		if m.IsEOG(tok) {
			break
		}
		out = append(out, tok)
		if err := c.DecodeTokens(ctx, 0, pos, []Token{tok}); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	return out
}

func TestLoadModelErrors(t *testing.T) {
	if _, err := LoadModel(filepath.Join(t.TempDir(), "missing.gguf"), ModelParams{}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("not a gguf file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadModel(bad, ModelParams{}); err == nil {
		t.Error("garbage file loaded without error")
	}
}

func TestModelInfo(t *testing.T) {
	m := storiesModel(t)
	if m.VocabSize() != 512 {
		t.Errorf("VocabSize = %d, want 512", m.VocabSize())
	}
	if m.ContextTrainSize() != 512 {
		t.Errorf("ContextTrainSize = %d, want 512", m.ContextTrainSize())
	}
	if m.BOS() == NoToken || m.EOS() == NoToken {
		t.Errorf("BOS %d EOS %d", m.BOS(), m.EOS())
	}
	if !m.IsEOG(m.EOS()) {
		t.Error("EOS is not end-of-generation")
	}
	if m.IsEOG(m.BOS()) {
		t.Error("BOS is end-of-generation")
	}
	if !m.AddsBOS() {
		t.Error("AddsBOS = false for a llama SPM model")
	}
	if arch, ok := m.Meta("general.architecture"); !ok || arch != "llama" {
		t.Errorf("Meta(general.architecture) = %q, %v", arch, ok)
	}
	if m.Description() == "" {
		t.Error("empty description")
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	models := map[string]*Model{"stories260K": storiesModel(t)}
	tiny, err := LoadModel(testenv.SharedFile(t, "models/llama-2-tiny-random.gguf"), ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	models["llama-2-tiny-random"] = tiny
	texts := []string{
		"Once upon a time, there was a little girl named Lily.",
		"Mr. Smith paid 3.5 dollars for 1,000 apples!",
		"Zürich — naïve café, 東京, 🙂 and \"quotes\"\nnew line\ttab",
		"   leading and trailing spaces   ",
		"x",
	}
	for name, m := range models {
		for _, text := range texts {
			toks, err := m.Tokenize(text, false, false)
			if err != nil {
				t.Fatalf("%s: Tokenize(%q): %v", name, text, err)
			}
			if len(toks) == 0 {
				t.Fatalf("%s: Tokenize(%q) = no tokens", name, text)
			}
			got, err := m.Detokenize(toks)
			if err != nil {
				t.Fatal(err)
			}
			// SentencePiece adds a leading space to the first word, and llama.cpp
			// removes it again when detokenizing.
			if got != text {
				t.Errorf("%s: Detokenize(Tokenize(%q)) = %q", name, text, got)
			}
			var pieces []byte
			for _, tok := range toks {
				pieces = m.AppendPiece(pieces, tok)
			}
			if !utf8.Valid(pieces) || strings.TrimPrefix(string(pieces), " ") != text {
				t.Errorf("%s: pieces of %q = %q", name, text, pieces)
			}
		}
		withBOS, err := m.Tokenize("hello", true, false)
		if err != nil {
			t.Fatal(err)
		}
		if withBOS[0] != m.BOS() {
			t.Errorf("%s: Tokenize with addSpecial starts with %d, want BOS %d", name, withBOS[0], m.BOS())
		}
		n, err := m.CountTokens("hello")
		if err != nil || n != len(withBOS) {
			t.Errorf("%s: CountTokens = %d, %v; want %d", name, n, err, len(withBOS))
		}
		empty, err := m.Tokenize("", false, false)
		if err != nil || len(empty) != 0 {
			t.Errorf("%s: Tokenize(\"\") = %v, %v", name, empty, err)
		}
		// parseSpecial turns the text of BOS into the BOS token.
		bosText := "<s>"
		sp, err := m.Tokenize(bosText+"hi", false, true)
		if err != nil || len(sp) == 0 || sp[0] != m.BOS() {
			t.Errorf("%s: Tokenize(%q, parseSpecial) = %v, %v", name, bosText+"hi", sp, err)
		}
		plain, err := m.Tokenize(bosText+"hi", false, false)
		if err != nil || len(plain) == 0 || plain[0] == m.BOS() {
			t.Errorf("%s: Tokenize(%q) without parseSpecial = %v, %v", name, bosText+"hi", plain, err)
		}
	}
	// The 32k vocabulary has byte-fallback tokens: a rare character is split into bytes
	// whose pieces are not valid UTF-8 on their own.
	toks, err := tiny.Tokenize("𝄞", false, false)
	if err != nil {
		t.Fatal(err)
	}
	var split bool
	for _, tok := range toks {
		if !utf8.ValidString(tiny.TokenToPiece(tok)) {
			split = true
		}
	}
	if !split {
		t.Errorf("%q was not split into byte tokens (%v); the test needs a byte-fallback example", "𝄞", toks)
	}
}

func TestLongTextTokenize(t *testing.T) {
	m := storiesModel(t)
	text := strings.Repeat("The cat sat on the mat. ", 2000)
	toks, err := m.Tokenize(text, true, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Detokenize(toks[1:])
	if err != nil || got != text {
		t.Errorf("round trip of %d bytes failed: %v", len(text), err)
	}
}

func TestVocabOnly(t *testing.T) {
	m, err := LoadModel(testenv.SharedFile(t, "models/stories260K.gguf"), ModelParams{VocabOnly: true, UseMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Tokenize("hello", true, false); err != nil {
		t.Error(err)
	}
	if _, err := NewContext(m, ContextParams{}); err == nil {
		t.Error("NewContext on a vocab-only model succeeded")
	}
}

func TestUseAfterClose(t *testing.T) {
	m, err := LoadModel(testenv.SharedFile(t, "models/stories260K.gguf"), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewContext(m, ContextParams{NCtx: 64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSampler(SamplerParams{})
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := m.Tokenize("Once upon", true, false)

	// Closing the model keeps the context working: it holds the weights.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := m.Tokenize("x", false, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Tokenize after Close: %v", err)
	}
	if m.TokenToPiece(toks[1]) != "" {
		t.Error("TokenToPiece after Close returned text")
	}
	if _, err := NewContext(m, ContextParams{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewContext after model Close: %v", err)
	}
	if err := c.DecodeTokens(context.Background(), 0, 0, toks); err != nil {
		t.Fatalf("decode on a context whose model was closed: %v", err)
	}
	if _, err := s.Sample(c, -1); err != nil {
		t.Fatal(err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second context Close: %v", err)
	}
	if err := c.DecodeTokens(context.Background(), 0, 0, toks); !errors.Is(err, ErrClosed) {
		t.Errorf("decode after Close: %v", err)
	}
	if _, err := c.Logits(-1); !errors.Is(err, ErrClosed) {
		t.Errorf("Logits after Close: %v", err)
	}
	if err := c.SeqRemove(0, 0, -1); !errors.Is(err, ErrClosed) {
		t.Errorf("SeqRemove after Close: %v", err)
	}
	if _, err := s.Sample(c, -1); !errors.Is(err, ErrClosed) {
		t.Errorf("Sample with closed context: %v", err)
	}
	s.Close()
	s.Close()
	if _, err := s.Sample(c, -1); !errors.Is(err, ErrClosed) {
		t.Errorf("Sample after Close: %v", err)
	}
	s.Accept(1) // no-op, no crash
	s.Reset()

	b, err := NewBatch(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b.Close()
	if err := b.Add(1, 0, true, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Batch.Add after Close: %v", err)
	}
}

// TestGreedyMatchesLlamaSimple compares the binding's greedy decode loop with Debian's
// llama-simple on the same prompt and length.
func TestGreedyMatchesLlamaSimple(t *testing.T) {
	tool := testenv.Command(t, "llama-simple", testenv.EnvFix)
	path := testenv.SharedFile(t, "models/stories260K.gguf")
	m := storiesModel(t)
	for _, tc := range []struct {
		prompt string
		n      int
	}{
		{"Once upon a time", 64},
		{"Lily and Tom went to the park", 100},
	} {
		toks := greedy(t, m, tc.prompt, tc.n)
		var ours []byte
		for _, tok := range toks {
			ours = m.AppendPiece(ours, tok)
		}
		theirs := runLlamaSimple(t, tool, path, tc.prompt, tc.n)
		prompt, _ := m.Tokenize(tc.prompt, true, false)
		var prefix []byte
		prefix = append(prefix, "<s>"...)
		for _, tok := range prompt[1:] {
			prefix = m.AppendPiece(prefix, tok)
		}
		want, ok := strings.CutPrefix(theirs, string(prefix))
		if !ok {
			t.Fatalf("llama-simple output %q does not start with the prompt %q", theirs, prefix)
		}
		if string(ours) != want {
			t.Errorf("prompt %q, %d tokens:\nours:         %q\nllama-simple: %q", tc.prompt, tc.n, ours, want)
		}
	}
}

// runLlamaSimple returns what llama-simple prints: the prompt's pieces (with <s>) and the
// generated pieces, without the final newline.
func runLlamaSimple(t *testing.T, tool, model, prompt string, n int) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(tool, "-m", model, "-n", strconv.Itoa(n), prompt)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, lastLines(stderr.String(), 10))
	}
	return strings.TrimSuffix(stdout.String(), "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestSeqRemoveReusesPrefix checks the KV operations the prefix cache depends on: after
// removing the tail of a sequence and decoding a different tail, the logits are those of
// a fresh evaluation of the whole text.
func TestSeqRemoveReusesPrefix(t *testing.T) {
	m := storiesModel(t)
	ctx := context.Background()
	a, _ := m.Tokenize("Once upon a time, there was a dog named Max.", true, false)
	b, _ := m.Tokenize("Once upon a time, there was a cat named Tom.", true, false)
	common := 0
	for common < len(a) && common < len(b) && a[common] == b[common] {
		common++
	}
	if common < 5 || common == len(b) {
		t.Fatalf("prompts share %d tokens; the test needs a partial overlap", common)
	}

	c := newContext(t, m, ContextParams{NCtx: 128, Threads: 1})
	if err := c.DecodeTokens(ctx, 0, 0, a); err != nil {
		t.Fatal(err)
	}
	if got := c.SeqPosMax(0); got != len(a)-1 {
		t.Errorf("SeqPosMax = %d, want %d", got, len(a)-1)
	}
	if err := c.SeqRemove(0, common, -1); err != nil {
		t.Fatal(err)
	}
	if got := c.SeqPosMax(0); got != common-1 {
		t.Errorf("SeqPosMax after remove = %d, want %d", got, common-1)
	}
	if err := c.DecodeTokens(ctx, 0, common, b[common:]); err != nil {
		t.Fatal(err)
	}
	reused, err := c.Logits(-1)
	if err != nil {
		t.Fatal(err)
	}

	fresh := newContext(t, m, ContextParams{NCtx: 128, Threads: 1})
	if err := fresh.DecodeTokens(ctx, 0, 0, b); err != nil {
		t.Fatal(err)
	}
	want, _ := fresh.Logits(-1)
	if d := maxAbsDiff(reused, want); d > 1e-3 {
		t.Errorf("logits after prefix reuse differ from a fresh evaluation by %g", d)
	}

	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := c.SeqPosMax(0); got != -1 {
		t.Errorf("SeqPosMax after Clear = %d", got)
	}
}

func TestSeqStateRoundTrip(t *testing.T) {
	m := storiesModel(t)
	ctx := context.Background()
	toks, _ := m.Tokenize("Once upon a time, there was a little girl", true, false)
	next, _ := m.Tokenize(" named", false, false)

	c := newContext(t, m, ContextParams{NCtx: 128, Threads: 1})
	if err := c.DecodeTokens(ctx, 0, 0, toks); err != nil {
		t.Fatal(err)
	}
	state, err := c.SaveSeqState(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(state) != c.SeqStateSize(0) {
		t.Errorf("state is %d bytes, SeqStateSize says %d", len(state), c.SeqStateSize(0))
	}
	file := filepath.Join(t.TempDir(), "seq.state")
	if err := c.SaveSeqStateFile(file, 0, toks); err != nil {
		t.Fatal(err)
	}
	if err := c.DecodeTokens(ctx, 0, len(toks), next); err != nil {
		t.Fatal(err)
	}
	want, _ := c.Logits(-1)

	for _, load := range []struct {
		name string
		fn   func(*Context) error
	}{
		{"bytes", func(c2 *Context) error { return c2.LoadSeqState(0, state) }},
		{"file", func(c2 *Context) error {
			got, err := c2.LoadSeqStateFile(file, 0, 1024)
			if err == nil && len(got) != len(toks) {
				t.Errorf("file gave %d tokens, want %d", len(got), len(toks))
			}
			return err
		}},
	} {
		c2 := newContext(t, m, ContextParams{NCtx: 128, Threads: 1})
		if err := load.fn(c2); err != nil {
			t.Fatalf("%s: %v", load.name, err)
		}
		if got := c2.SeqPosMax(0); got != len(toks)-1 {
			t.Errorf("%s: restored SeqPosMax = %d, want %d", load.name, got, len(toks)-1)
		}
		if err := c2.DecodeTokens(ctx, 0, len(toks), next); err != nil {
			t.Fatal(err)
		}
		got, _ := c2.Logits(-1)
		if d := maxAbsDiff(got, want); d > 1e-3 {
			t.Errorf("%s: logits after restoring the state differ by %g", load.name, d)
		}
	}
	if err := c.LoadSeqState(0, []byte("garbage")); err == nil {
		t.Error("loading garbage state succeeded")
	}
	if _, err := c.LoadSeqStateFile(filepath.Join(t.TempDir(), "none"), 0, 10); err == nil {
		t.Error("loading a missing state file succeeded")
	}
}

func TestDecodeErrors(t *testing.T) {
	m := storiesModel(t)
	c := newContext(t, m, ContextParams{NCtx: 64, NBatch: 16, Threads: 1})
	toks, _ := m.Tokenize(strings.Repeat("The cat sat on the mat. ", 40), true, false)
	if len(toks) <= c.NCtx() {
		t.Fatalf("prompt of %d tokens fits the context of %d", len(toks), c.NCtx())
	}
	if err := c.DecodeTokens(context.Background(), 0, 0, toks); !errors.Is(err, ErrNoKVSlot) {
		t.Errorf("overlong prompt: err = %v, want ErrNoKVSlot", err)
	}
	// Longer than NBatch but within the context: split into chunks.
	if err := c.DecodeTokens(context.Background(), 0, 0, toks[:40]); err != nil {
		t.Errorf("40 tokens with NBatch 16: %v", err)
	}
	if err := c.DecodeTokens(context.Background(), 3, 0, toks[:4]); !errors.Is(err, ErrDecode) {
		t.Errorf("sequence out of range: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.DecodeTokens(ctx, 0, 40, toks[40:44])
	if !errors.Is(err, ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled decode: err = %v, want ErrAborted and context.Canceled", err)
	}
	// The context is still usable afterwards.
	if err := c.DecodeTokens(context.Background(), 0, 40, toks[40:44]); err != nil {
		t.Errorf("decode after an aborted one: %v", err)
	}
}

func TestBatchDecodeTwoSequences(t *testing.T) {
	m := storiesModel(t)
	ctx := context.Background()
	a, _ := m.Tokenize("Once upon a time", true, false)
	b, _ := m.Tokenize("The dog ran", true, false)
	c := newContext(t, m, ContextParams{NCtx: 128, Threads: 1, SeqMax: 2})
	batch, err := NewBatch(len(a)+len(b), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	for i, tok := range a {
		if err := batch.Add(tok, i, i == len(a)-1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, tok := range b {
		if err := batch.Add(tok, i, i == len(b)-1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Add(1, 0, false, 0); err == nil {
		t.Error("Add to a full batch succeeded")
	}
	if err := c.Decode(ctx, batch); err != nil {
		t.Fatal(err)
	}
	gotA, err := c.Logits(len(a) - 1)
	if err != nil {
		t.Fatal(err)
	}
	gotB, err := c.Logits(-1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		toks []Token
		got  []float32
	}{{a, gotA}, {b, gotB}} {
		f := newContext(t, m, ContextParams{NCtx: 128, Threads: 1})
		if err := f.DecodeTokens(ctx, 0, 0, tc.toks); err != nil {
			t.Fatal(err)
		}
		want, _ := f.Logits(-1)
		if d := maxAbsDiff(tc.got, want); d > 1e-3 {
			t.Errorf("two-sequence batch logits differ from single decode by %g", d)
		}
	}
	if c.SeqPosMax(1) != len(b)-1 {
		t.Errorf("SeqPosMax(1) = %d", c.SeqPosMax(1))
	}
	if err := c.SeqRemove(0, -1, -1); err != nil {
		t.Fatal(err)
	}
	if c.SeqPosMax(0) != -1 || c.SeqPosMax(1) != len(b)-1 {
		t.Errorf("after removing sequence 0: SeqPosMax(0) = %d, SeqPosMax(1) = %d", c.SeqPosMax(0), c.SeqPosMax(1))
	}
}

func TestSamplerSeedsAndPenalties(t *testing.T) {
	m := storiesModel(t)
	ctx := context.Background()
	c := newContext(t, m, ContextParams{NCtx: 128, Threads: 1})
	toks, _ := m.Tokenize("Once upon a time", true, false)
	if err := c.DecodeTokens(ctx, 0, 0, toks); err != nil {
		t.Fatal(err)
	}
	draw := func(p SamplerParams, n int) []Token {
		s, err := NewSampler(p)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out []Token
		for range n {
			tok, err := s.Sample(c, -1)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tok)
		}
		return out
	}
	hot := SamplerParams{Temperature: 5, Seed: 42}
	a, b := draw(hot, 20), draw(hot, 20)
	if !equalTokens(a, b) {
		t.Errorf("same seed gave %v and %v", a, b)
	}
	hot.Seed = 43
	if equalTokens(a, draw(hot, 20)) {
		t.Error("different seeds gave the same 20 draws at temperature 5")
	}
	g := draw(SamplerParams{}, 5)
	for _, tok := range g[1:] {
		if tok != g[0] {
			t.Errorf("greedy draws from the same logits differ: %v", g)
		}
	}
	// TopK 1 is greedy whatever the temperature.
	k1 := draw(SamplerParams{Temperature: 1, TopK: 1, Seed: 7}, 5)
	if !equalTokens(k1, g) {
		t.Errorf("top-k 1 = %v, greedy = %v", k1, g)
	}
	// A strong repetition penalty moves greedy off the token it just accepted.
	pen := draw(SamplerParams{RepeatPenalty: 100, VocabSize: m.VocabSize()}, 2)
	if pen[0] != g[0] || pen[1] == pen[0] {
		t.Errorf("penalised greedy draws = %v (greedy %v)", pen, g[0])
	}
	if _, err := NewSampler(SamplerParams{RepeatPenalty: 1.1}); err == nil {
		t.Error("penalties without VocabSize accepted")
	}
	if _, err := NewSampler(SamplerParams{TopP: 2}); err == nil {
		t.Error("TopP 2 accepted")
	}
	for _, p := range []SamplerParams{{Temperature: 0.8, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 32, VocabSize: 512, Seed: RandomSeed}} {
		if got := draw(p, 3); len(got) != 3 {
			t.Errorf("full chain: %v", got)
		}
	}
}

func equalTokens(a, b []Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConcurrentUse runs tokenization and decoding on several goroutines; with -race it
// checks the locking of the Go side.
func TestConcurrentUse(t *testing.T) {
	m := storiesModel(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := []string{"Once upon a time", "The dog", "Lily was happy", "Tom had a ball"}[i]
			got := greedy(t, m, prompt, 10)
			if len(got) == 0 {
				t.Errorf("no tokens for %q", prompt)
			}
			for range 20 {
				if _, err := m.CountTokens(prompt); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestAbortDuringDecode cancels decodes while they run and checks that each one either
// finished or reports ErrAborted, and that the context stays usable.
func TestAbortDuringDecode(t *testing.T) {
	m := storiesModel(t)
	c := newContext(t, m, ContextParams{NCtx: 512, Threads: 1})
	toks, _ := m.Tokenize(strings.Repeat("The cat sat on the mat. ", 60), true, false)
	toks = toks[:500]
	var aborted, finished int
	for i := range 30 {
		if err := c.Clear(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i*100)*time.Microsecond)
		err := c.DecodeTokens(ctx, 0, 0, toks)
		cancel()
		switch {
		case err == nil:
			finished++
		case errors.Is(err, ErrAborted):
			aborted++
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("aborted decode does not wrap the context's cause: %v", err)
			}
		default:
			t.Fatalf("decode %d: %v", i, err)
		}
	}
	t.Logf("%d decodes aborted, %d finished", aborted, finished)
	if aborted == 0 {
		t.Error("no decode was aborted")
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := c.DecodeTokens(context.Background(), 0, 0, toks); err != nil {
		t.Fatalf("decode after aborted ones: %v", err)
	}
}

// TestArgmaxMatchesGreedyChain: plain greedy sampling takes the largest logit directly;
// it must pick exactly what llama.cpp's greedy sampler picks.
func TestArgmaxMatchesGreedyChain(t *testing.T) {
	m := storiesModel(t)
	fast, err := NewSampler(SamplerParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	chain, err := NewSampler(SamplerParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	chain.argmax = false // through llama_sampler_sample
	if !fast.argmax {
		t.Fatal("plain greedy does not take the argmax path")
	}
	c := newContext(t, m, ContextParams{NCtx: 512, Threads: 1})
	toks, _ := m.Tokenize("Tom and Sue found a big red ball in the garden. They", true, false)
	if err := c.DecodeTokens(context.Background(), 0, 0, toks); err != nil {
		t.Fatal(err)
	}
	for pos := len(toks); pos < 400; pos++ {
		a, err := fast.Sample(c, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := chain.Sample(c, -1)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Fatalf("position %d: argmax %d, llama.cpp greedy %d", pos, a, b)
		}
		if err := c.DecodeTokens(context.Background(), 0, pos, []Token{a}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchThreadsFrom: a batch below BatchThreadsFrom decodes on Threads and one at it
// on ThreadsBatch, switching back and forth, with the logits of a context that gives
// every batch the same threads (ggml splits a matrix product by rows, so the thread
// count does not change a row's sums).
func TestBatchThreadsFrom(t *testing.T) {
	m := storiesModel(t)
	toks, err := m.Tokenize("Once upon a time, there was a little girl named Lily. She liked to play.", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) < 12 {
		t.Fatalf("%d tokens, want 12", len(toks))
	}
	// Batches of 3, 8, 1 and 3 tokens: below, at, single, below again.
	pieces := [][2]int{{0, 3}, {3, 11}, {11, 12}, {12, min(15, len(toks))}}
	decode := func(p ContextParams) [][]float32 {
		c := newContext(t, m, p)
		var out [][]float32
		for _, pc := range pieces {
			if err := c.DecodeTokens(context.Background(), 0, pc[0], toks[pc[0]:pc[1]]); err != nil {
				t.Fatalf("%+v: decode %v: %v", p, pc, err)
			}
			l, err := c.Logits(-1)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(l))
		}
		return out
	}
	want := decode(ContextParams{NCtx: 64, Threads: 2, ThreadsBatch: 2, BatchThreadsFrom: 1})
	got := decode(ContextParams{NCtx: 64, Threads: 1, ThreadsBatch: 2, BatchThreadsFrom: 8})
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("batch %v: logits differ from a context whose batches all run on 2 threads", pieces[i])
		}
	}
	if _, err := NewContext(m, ContextParams{BatchThreadsFrom: -1}); err == nil {
		t.Error("negative BatchThreadsFrom accepted")
	}
}

// TestDecodeTokensKeeping: one batch keeps the logits of a token inside it beside the
// last one's, close to those a batch ending at that token gives; a token outside the last
// chunk, or the last token itself, is refused.
func TestDecodeTokensKeeping(t *testing.T) {
	m := storiesModel(t)
	toks, err := m.Tokenize("Once upon a time, there was a little girl named Lily.", true, false)
	if err != nil {
		t.Fatal(err)
	}
	const keep = 7
	if len(toks) <= keep+2 {
		t.Fatalf("%d tokens, want more than %d", len(toks), keep+2)
	}
	ctx := context.Background()
	alone := newContext(t, m, ContextParams{NCtx: 64, Threads: 1})
	if err := alone.DecodeTokens(ctx, 0, 0, toks[:keep+1]); err != nil {
		t.Fatal(err)
	}
	wantKept, _ := alone.Logits(-1)
	if err := alone.DecodeTokens(ctx, 0, keep+1, toks[keep+1:]); err != nil {
		t.Fatal(err)
	}
	wantLast, _ := alone.Logits(-1)

	c := newContext(t, m, ContextParams{NCtx: 64, Threads: 1})
	if err := c.DecodeTokens(ctx, 0, 0, toks[:2]); err != nil {
		t.Fatal(err)
	}
	// From token 2 on: keep is the batch's token 5.
	if err := c.DecodeTokensKeeping(ctx, 0, 2, toks[2:], keep-2); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Logits(-2)
	if err != nil {
		t.Fatal(err)
	}
	last, err := c.Logits(-1)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmp := range []struct {
		name      string
		got, want []float32
	}{{"kept token", kept, wantKept}, {"last token", last, wantLast}} {
		if argmax(cmp.got) != argmax(cmp.want) || maxAbsDiff(cmp.got, cmp.want) > 1e-2 {
			t.Errorf("%s: logits differ from separate batches' by %g", cmp.name, maxAbsDiff(cmp.got, cmp.want))
		}
	}
	long := make([]Token, 12)
	for i := range long {
		long[i] = toks[i%len(toks)]
	}
	c2 := newContext(t, m, ContextParams{NCtx: 64, Threads: 1, NBatch: 8})
	for _, k := range []int{3, len(long) - 1, -1} {
		if err := c2.DecodeTokensKeeping(ctx, 0, 0, long, k); !errors.Is(err, ErrDecode) {
			t.Errorf("keep %d of %d tokens in chunks of 8: %v, want ErrDecode", k, len(long), err)
		}
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
