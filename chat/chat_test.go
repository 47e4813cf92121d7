package chat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/dialogue/protocol"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

// chatFixture is the demo config (stories260K, greedy, plain format with the roles
// Child and Storyteller) with its sessions in a temporary directory.
type chatFixture struct {
	sessions string
	cfg      pipeline.Config
}

func newChatFixture(t *testing.T) chatFixture {
	t.Helper()
	cfg := demoConfig(t)
	f := chatFixture{sessions: filepath.Join(t.TempDir(), "sessions"), cfg: cfg}
	f.cfg.Session.Dir = f.sessions
	return f
}

// chatOptions says how a test chat runs, as `agent chat` would run it with flags.
type chatOptions struct {
	session string  // --session
	resume  bool    // --resume
	system  *string // --system
	cfg     func(*pipeline.Config)
}

// chatTo runs a chat on input, writing to out and errOut.
func (f chatFixture) chatTo(ctx context.Context, t *testing.T, out, errOut io.Writer, input string, o chatOptions) error {
	t.Helper()
	cfg := f.cfg
	cfg.Session.Name, cfg.Session.Resume = o.session, o.resume
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	dir, err := pipeline.SessionPath(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Run(ctx, cfg, Options{SessionDir: dir, SystemPrompt: o.system, In: strings.NewReader(input), Out: out, Err: errOut, Logger: zap.NewNop()})
}

// chat runs a chat on input and returns stdout, stderr and the error.
func (f chatFixture) chat(ctx context.Context, t *testing.T, input string, o chatOptions) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := f.chatTo(ctx, t, &out, &errOut, input, o)
	return out.String(), errOut.String(), err
}

func (f chatFixture) session(t *testing.T, name string) []dialogue.Utterance {
	t.Helper()
	s, err := dialogue.LoadSession(filepath.Join(f.sessions, name))
	if err != nil {
		t.Fatal(err)
	}
	return s.History.Utterances()
}

// referenceReply is what the engine itself writes, greedy, for the prompt a fresh
// store builds from the given user lines and agent replies (alternating, user first),
// through the config's keyword filter and trimmed: what the chat must print and store.
func referenceReply(t *testing.T, cfg pipeline.Config, turns ...string) string {
	t.Helper()
	ctx := context.Background()
	eng, err := pipeline.LoadEngines(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	store, err := pipeline.NewStore(ctx, cfg, eng, "", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i, text := range turns {
		speaker := dialogue.User
		if i%2 == 1 {
			speaker = dialogue.Agent
		}
		if err := store.AppendUtterance(ctx, dialogue.Utterance{Speaker: speaker, Text: text, TurnID: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	prompt, stop, err := store.BuildPrompt(ctx, len(turns)+1)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.LLM
	res, err := eng.LLM.Generate(ctx, llm.Request{Prompt: prompt, Stop: stop, MaxTokens: l.MaxTokens, Sampling: llm.Sampling{
		Temperature: l.Temperature, TopK: l.TopK, TopP: l.TopP, MinP: l.MinP, RepeatPenalty: l.RepeatPenalty, Seed: l.Seed,
	}}, func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	f := dialogue.NewKeywordFilter(cfg.Dialogue.RemoveWords...)
	return strings.TrimSpace(f.Push(res.Text) + f.Flush())
}

func describeUtts(utts []dialogue.Utterance) string {
	var parts []string
	for _, u := range utts {
		s := fmt.Sprintf("%s %d", u.Speaker, u.TurnID)
		if u.Interrupted {
			s += " interrupted"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

var promptHeader = regexp.MustCompile(`(?m)^--- prompt as it stands: (\d+) tokens, (\d+) utterances shown, 0 dropped to fit, stop .*---\n`)

// shownPrompts returns the prompts /prompt printed and their token counts.
func shownPrompts(t *testing.T, out string) (prompts []string, tokens []int) {
	t.Helper()
	for _, m := range promptHeader.FindAllStringSubmatchIndex(out, -1) {
		n, _ := strconv.Atoi(out[m[2]:m[3]])
		rest := out[m[1]:]
		end := strings.Index(rest, "\n--- end of prompt ---\n")
		if end < 0 {
			t.Fatalf("unterminated prompt in %q", rest)
		}
		prompts = append(prompts, rest[:end])
		tokens = append(tokens, n)
	}
	return prompts, tokens
}

func TestChatTwoTurns(t *testing.T) {
	f := newChatFixture(t)
	cfg := f.cfg
	input := "Hello there\n\n/history\nTell me a story\n/prompt\n/frobnicate\n/save\n"
	out, errOut, err := f.chat(context.Background(), t, input, chatOptions{session: "two"})
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	utts := f.session(t, "two")
	if got, want := describeUtts(utts), "user 1, agent 2, user 3, agent 4"; got != want {
		t.Fatalf("saved history %q, want %q\nstdout: %s", got, want, out)
	}
	first := referenceReply(t, cfg, "Hello there")
	if first == "" {
		t.Fatal("the engine wrote nothing for the first prompt")
	}
	if utts[1].Text != first {
		t.Errorf("first reply stored as %q, the engine writes %q for the store's prompt", utts[1].Text, first)
	}
	if second := referenceReply(t, cfg, "Hello there", first, "Tell me a story"); utts[3].Text != second {
		t.Errorf("second reply stored as %q, the engine writes %q", utts[3].Text, second)
	}
	for _, u := range utts {
		if u.Interrupted || u.Text == "" {
			t.Errorf("utterance %+v: interrupted or empty", u)
		}
	}
	for _, want := range []string{
		"Storyteller: " + first + "\n",
		"Storyteller: " + utts[3].Text + "\n",
		// /history after the first exchange, continuation lines indented.
		"[1] Child: Hello there\n[2] Storyteller: " + strings.ReplaceAll(first, "\n", "\n  ") + "\n",
		"unknown command /frobnicate\ncommands:\n",
		"saved in " + filepath.Join(f.sessions, "two") + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "session saved in "+filepath.Join(f.sessions, "two")) {
		t.Errorf("stderr does not report the final save: %q", errOut)
	}

	prompts, tokens := shownPrompts(t, out)
	if len(prompts) != 1 {
		t.Fatalf("/prompt printed %d prompts:\n%s", len(prompts), out)
	}
	wantPrompt := "A friendly storyteller talks with a child.\n\nChild: Hello there\nStoryteller: " + first +
		"\nChild: Tell me a story\nStoryteller: " + utts[3].Text + "\nStoryteller:"
	if prompts[0] != wantPrompt {
		t.Errorf("/prompt showed\n%q\nwant\n%q", prompts[0], wantPrompt)
	}
	eng, err := pipeline.LoadEngines(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if n, err := eng.Tokenizer.CountTokens(prompts[0]); err != nil || n != tokens[0] {
		t.Errorf("/prompt says %d tokens, the model counts %d (%v)", tokens[0], n, err)
	}
}

func TestChatSystemPrompt(t *testing.T) {
	f := newChatFixture(t)
	const initial = "A friendly storyteller talks with a child."
	tests := []struct {
		name, input string
		opts        chatOptions
		want        []string
		// wantPrompts are the system prompts the /prompt outputs start with, in order.
		wantPrompts []string
	}{
		{
			name:  "show, change, reset",
			input: "/system\n/system Cats tell tales.\n/prompt\n/system\n/reset\n/prompt\n",
			want: []string{
				fmt.Sprintf("system prompt: %q\n", initial),
				fmt.Sprintf("system prompt changed to %q (it was %q)\n", "Cats tell tales.", initial),
				fmt.Sprintf("system prompt: %q\n", "Cats tell tales."),
				fmt.Sprintf("system prompt reset to %q (it was %q)\n", initial, "Cats tell tales."),
			},
			wantPrompts: []string{"Cats tell tales.", initial},
		},
		{
			name:        "--system replaces the initial prompt",
			input:       "/system\n/system Dogs.\n/reset\n/prompt\n",
			opts:        chatOptions{system: ptr("A dragon tells stories.")},
			want:        []string{fmt.Sprintf("system prompt reset to %q (it was %q)\n", "A dragon tells stories.", "Dogs.")},
			wantPrompts: []string{"A dragon tells stories."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := f.chat(context.Background(), t, tt.input, tt.opts)
			if err != nil {
				t.Fatalf("chat: %v\nstderr: %s", err, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			prompts, _ := shownPrompts(t, out)
			if len(prompts) != len(tt.wantPrompts) {
				t.Fatalf("%d prompts shown, want %d:\n%s", len(prompts), len(tt.wantPrompts), out)
			}
			for i, p := range prompts {
				if want := tt.wantPrompts[i] + "\n\nStoryteller:"; p != want {
					t.Errorf("prompt %d: %q, want %q", i, p, want)
				}
			}
		})
	}
}

func TestChatResume(t *testing.T) {
	f := newChatFixture(t)
	if _, errOut, err := f.chat(context.Background(), t, "Hello there\n/system Cats tell tales.\n", chatOptions{session: "kept"}); err != nil {
		t.Fatalf("first chat: %v\n%s", err, errOut)
	}
	first := f.session(t, "kept")
	out, errOut, err := f.chat(context.Background(), t, "Tell me more\n/history\n/system\n/quit\nnever read\n", chatOptions{session: "kept", resume: true})
	if err != nil {
		t.Fatalf("resumed chat: %v\n%s", err, errOut)
	}
	utts := f.session(t, "kept")
	if got, want := describeUtts(utts), "user 1, agent 2, user 3, agent 4"; got != want {
		t.Fatalf("resumed history %q, want %q", got, want)
	}
	if utts[1].Text != first[1].Text {
		t.Errorf("the first reply changed on resume: %q, was %q", utts[1].Text, first[1].Text)
	}
	for _, want := range []string{"[1] Child: Hello there\n", "[3] Child: Tell me more\n[4] Storyteller: ", `system prompt: "Cats tell tales."`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "never read") {
		t.Error("a line after /quit was answered")
	}
}

func TestChatMaxTokens(t *testing.T) {
	f := newChatFixture(t)
	short := f.cfg
	short.LLM.MaxTokens = 3
	want := referenceReply(t, short, "Hello there")
	out, errOut, err := f.chat(context.Background(), t, "Hello there\n", chatOptions{cfg: func(c *pipeline.Config) { c.LLM.MaxTokens = 3 }})
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "Storyteller: "+want+"\n") {
		t.Errorf("stdout %q, want the 3-token reply %q", out, want)
	}
}

// cancelOnReply is the chat's stdout; it cancels the chat (as Ctrl-C does) as soon as
// the first text of a reply is printed. (It does not embed the buffer: io.WriteString
// would then bypass Write.)
type cancelOnReply struct {
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnReply) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if _, after, ok := strings.Cut(w.buf.String(), "Storyteller: "); ok && strings.TrimSpace(after) != "" {
		w.cancel()
	}
	return n, err
}

func TestChatInterrupted(t *testing.T) {
	f := newChatFixture(t)
	full := referenceReply(t, f.cfg, "Hello there")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnReply{cancel: cancel}
	var errOut bytes.Buffer
	err := f.chatTo(ctx, t, out, &errOut, "Hello there\nSecond line\n", chatOptions{session: "cut"})
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut.String())
	}
	_, after, _ := strings.Cut(out.buf.String(), "Storyteller: ")
	printed, ok := strings.CutSuffix(after, " [interrupted]\n")
	if !ok {
		t.Fatalf("stdout %q does not end with the interrupted mark", out.buf.String())
	}
	utts := f.session(t, "cut")
	if got, want := describeUtts(utts), "user 1, agent 2 interrupted"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	u := utts[1]
	if u.Text != strings.TrimSpace(printed) || u.Text == "" {
		t.Errorf("stored %q, printed %q", u.Text, printed)
	}
	if !strings.HasPrefix(full, u.Text) || len(u.Text) >= len(full) {
		t.Errorf("stored %q is not a strict prefix of the whole reply %q: generation did not stop at once", u.Text, full)
	}
}

// failAfter stands in for an engine that breaks mid-reply (a device error, a server
// that drops the stream), which the real engine cannot be made to do on demand: it lets
// the real engine write pieces pieces, then stops it and fails.
type failAfter struct {
	llm.Engine
	pieces int
}

var errDeviceLost = errors.New("device lost")

func (e failAfter) Generate(ctx context.Context, req llm.Request, emit func(string) error) (llm.Result, error) {
	n := 0
	res, err := e.Engine.Generate(ctx, req, func(piece string) error {
		if n == e.pieces {
			return errDeviceLost
		}
		n++
		return emit(piece)
	})
	if errors.Is(err, errDeviceLost) {
		res.StopReason = llm.StopError
		return res, fmt.Errorf("llm: decoding: %w", errDeviceLost)
	}
	return res, err
}

// newTestChat builds a chat on the demo engines as the command does, with eng wrapping
// the real engine.
func newTestChat(t *testing.T, f chatFixture, think bool, wrap func(llm.Engine) chatEngine) (*chat, *dialogue.Store, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cfg := f.cfg
	ctx := context.Background()
	eng, err := pipeline.LoadEngines(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	store, err := pipeline.NewStore(ctx, cfg, eng, "", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var out, errOut bytes.Buffer
	var ce chatEngine = eng.LLM
	if wrap != nil {
		ce = wrap(eng.LLM)
	}
	c, err := newChat(ctx, chatConfig{Config: cfg, Engine: ce, Tokenizer: eng.Tokenizer, Context: eng.Context, Store: store,
		Think: think, Out: &out, Err: &errOut, Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return c, store, &out, &errOut
}

func TestChatModelFailsMidReply(t *testing.T) {
	f := newChatFixture(t)
	c, store, out, errOut := newTestChat(t, f, false, func(e llm.Engine) chatEngine { return failAfter{Engine: e, pieces: 3} })
	if err := c.run(context.Background(), strings.NewReader("Hello there\nTell me a story\n/history\n")); err != nil {
		t.Fatalf("the chat ended on a model failure: %v", err)
	}
	h, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	utts := h.Utterances()
	// Both replies failed after three pieces; the chat went on to the second line.
	if got, want := describeUtts(utts), "user 1, agent 2 interrupted, user 3, agent 4 interrupted"; got != want {
		t.Fatalf("history %q, want %q\nstdout: %s", got, want, out)
	}
	if n := strings.Count(errOut.String(), "the model failed during the reply (llm: decoding: device lost)"); n != 2 {
		t.Errorf("%d error lines, want 2:\n%s", n, errOut)
	}
	for _, u := range []dialogue.Utterance{utts[1], utts[3]} {
		if u.Text == "" || !strings.Contains(out.String(), "Storyteller: "+u.Text+" [failed]\n") {
			t.Errorf("stored %q, which is not what was printed:\n%s", u.Text, out)
		}
	}
	if want := "[2] Storyteller: " + strings.ReplaceAll(utts[1].Text, "\n", "\n  ") + " (interrupted)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("/history lacks %q:\n%s", want, out)
	}
	if full := referenceReply(t, f.cfg, "Hello there"); !strings.HasPrefix(full, utts[1].Text) || utts[1].Text == full {
		t.Errorf("stored %q, not a strict prefix of the whole reply %q", utts[1].Text, full)
	}
}

func TestChatThink(t *testing.T) {
	f := newChatFixture(t)
	cfg := f.cfg
	const question = "Why is the sky blue?"
	plain := referenceReply(t, cfg, question)
	forced := forcedAnswer(t, cfg, question)
	tests := []struct {
		name string
		// examples replaces the self-ask examples (nil: the shipped ones).
		examples []protocol.SelfAskExample
		// script, when set, answers the self-ask prompts instead of stories260K.
		script  string
		want    string
		wantErr string // the note on stderr
	}{
		// The shipped few-shot examples alone take more than stories260K's 512-token
		// context: thinking is skipped and the reply is the plain one.
		{name: "prompt too long", want: plain, wantErr: "cannot think (llm: prompt too long"},
		// Without examples the prompt fits. stories260K writes a story, not self-ask
		// steps: the first step decodes to no decision, so the final answer is forced,
		// and its first line is the answer.
		{name: "forced answer", examples: []protocol.SelfAskExample{}, want: forced},
		// A model that writes nothing usable even when forced (ErrNoDecision from the
		// run): the chat answers directly with the real model.
		{name: "no decision", examples: []protocol.SelfAskExample{}, script: "silent", want: plain,
			wantErr: "thinking gave no final answer (self-ask: the output has neither a follow-up question nor a final answer"},
		// A model that follows the protocol: one follow-up, then the answer; only the
		// answer (through the keyword filter) is shown and stored.
		{name: "follow-up and answer", examples: []protocol.SelfAskExample{}, script: "answer", want: "Because air scatters blue light."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wrap func(llm.Engine) chatEngine
			if tt.script != "" {
				wrap = func(e llm.Engine) chatEngine { return selfAskScript{Engine: e, mode: tt.script} }
			}
			c, store, out, errOut := newTestChat(t, f, true, wrap)
			if tt.examples != nil {
				c.selfAsk.Examples = tt.examples
			}
			if err := c.run(context.Background(), strings.NewReader(question+"\n")); err != nil {
				t.Fatal(err)
			}
			h, err := store.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			utts := h.Utterances()
			if got, want := describeUtts(utts), "user 1, agent 2"; got != want {
				t.Fatalf("history %q, want %q", got, want)
			}
			if tt.wantErr == "" && errOut.Len() > 0 {
				t.Errorf("stderr: %q", errOut)
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tt.wantErr)
			}
			if utts[1].Text != tt.want || out.String() != "Storyteller: "+tt.want+"\n" {
				t.Errorf("stored %q, printed %q; want %q", utts[1].Text, out, tt.want)
			}
		})
	}
}

// forcedAnswer runs the self-ask protocol without examples on stories260K, as --think
// lays it out for a first question: the system prompt, then the question.
func forcedAnswer(t *testing.T, cfg pipeline.Config, question string) string {
	t.Helper()
	eng, err := pipeline.LoadEngines(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	p := protocol.SelfAsk{Template: protocol.MustParseTemplate(cfg.Dialogue.SystemPrompt + "\n\n" + protocol.DefaultSelfAskTemplate)}
	l := cfg.LLM
	comp := &chatCompleter{engine: eng.LLM, sampling: llm.Sampling{Temperature: l.Temperature, TopK: l.TopK, TopP: l.TopP, MinP: l.MinP, RepeatPenalty: l.RepeatPenalty, Seed: l.Seed}}
	res, err := p.Run(context.Background(), comp, protocol.Scratchpad{Question: question}, protocol.RunOptions{MaxTokens: l.MaxTokens})
	if err != nil {
		t.Fatalf("self-ask on stories260K: %v", err)
	}
	if !res.Forced || res.Answer == "" {
		t.Fatalf("stories260K gave %+v; the test expects a forced, non-empty answer", res)
	}
	return res.Answer
}

// selfAskScript stands in for a model on self-ask prompts, which stories260K cannot
// follow, and passes every other prompt to the real engine. mode "answer" asks one
// follow-up and then answers; "silent" writes nothing.
type selfAskScript struct {
	llm.Engine
	mode string
}

func (s selfAskScript) Generate(ctx context.Context, req llm.Request, emit func(string) error) (llm.Result, error) {
	if !strings.Contains(req.Prompt, "Are follow up questions needed here:") {
		return s.Engine.Generate(ctx, req, emit)
	}
	var text string
	switch {
	case s.mode == "silent":
	case strings.HasSuffix(req.Prompt, "Intermediate answer:"):
		text = " It scatters blue light most."
	case strings.Contains(req.Prompt, "Intermediate answer: It scatters"):
		text = " No.\nSo the final answer is: Because air scatters blue light.*"
	default:
		text = " Yes.\nFollow up: What does air do to sunlight?\n"
	}
	if text == "" {
		return llm.Result{StopReason: llm.StopEOG}, nil
	}
	return llm.Result{Text: text, StopReason: llm.StopString}, emit(text)
}

// interruptAfter calls the chat's Ctrl-C handler after some pieces, as a user pressing
// Ctrl-C while the reply streams.
type interruptAfter struct {
	llm.Engine
	pieces int
	press  *func()
}

func (e interruptAfter) Generate(ctx context.Context, req llm.Request, emit func(string) error) (llm.Result, error) {
	n := 0
	return e.Engine.Generate(ctx, req, func(piece string) error {
		if n == e.pieces && *e.press != nil {
			(*e.press)() // Ctrl-C
		}
		n++
		return emit(piece)
	})
}

func TestChatCtrlCStopsOnlyTheReply(t *testing.T) {
	f := newChatFixture(t)
	var press func()
	c, store, out, _ := newTestChat(t, f, false, func(e llm.Engine) chatEngine {
		return interruptAfter{Engine: e, pieces: 3, press: &press}
	})
	c.OnInterrupt = func(fn func()) func() {
		press = fn
		return func() { press = nil }
	}
	if err := c.run(context.Background(), strings.NewReader("Hello there\nTell me a story\n")); err != nil {
		t.Fatalf("Ctrl-C during a reply ended the chat: %v", err)
	}
	h, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Each reply was stopped after its third piece, and the chat went on to the next line.
	if got, want := describeUtts(h.Utterances()), "user 1, agent 2 interrupted, user 3, agent 4 interrupted"; got != want {
		t.Fatalf("history %q, want %q\nstdout: %s", got, want, out)
	}
	if press != nil {
		t.Error("the reply's Ctrl-C handler is still installed after the reply")
	}
}

func ptr[T any](v T) *T { return &v }
