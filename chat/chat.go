// Package chat is the text conversation with the agent ('agent chat'): its history,
// memory and LLM, which pipeline opens as the voice agent's, answering typed lines, with
// slash commands to look at and change the conversation.
package chat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/dialogue/protocol"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

// Options are the settings of a text chat.
type Options struct {
	// SessionDir is the chat's session: it is loaded when cfg.Session.Resume is set, and
	// /save and the end of the chat save there ("" for no session).
	SessionDir string
	// SystemPrompt, when not nil, is the chat's system prompt: a new history starts with
	// it (so /reset comes back to it); a resumed one keeps its saved initial prompt and
	// gets this one set on top.
	SystemPrompt *string
	// Think answers with the self-ask protocol: the model asks itself follow-up
	// questions, and only its final answer is shown and stored.
	Think bool
	// In holds the user's lines; Interactive shows a prompt before each (a terminal, not
	// piped input).
	In          io.Reader
	Interactive bool
	// Out receives the conversation, Err the notes about it (failures, the final save).
	Out, Err io.Writer
	Logger   *zap.Logger
	// OnInterrupt, when set, routes Ctrl-C to f until the returned function is called;
	// a reply uses it so that Ctrl-C stops the reply, not the chat.
	OnInterrupt func(f func()) (restore func())
}

// Run is a text conversation with the agent's history, memory and LLM: it answers each
// line of opts.In (slash commands aside) until the input ends, /quit, or ctx's end
// (Ctrl-C), and saves the session at the end.
func Run(ctx context.Context, cfg pipeline.Config, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if opts.SystemPrompt != nil && !cfg.Session.Resume {
		cfg.Dialogue.SystemPrompt = *opts.SystemPrompt
	}
	// An engine that reads a model file: say how to get it rather than fail to load it.
	if eng, err := pipeline.FindEngine(pipeline.KeyLLMEngine, cfg.LLM.Engine); err == nil {
		for _, n := range eng.Needs(cfg) {
			if _, err := os.Stat(n.Path); n.Model && err != nil {
				return fmt.Errorf("the LLM model %s cannot be read (fix: run '%s', or give --config FILE with an llm.model you have): %w", n.Path, modelstore.Builtin().PullCommand(n.Path), err)
			}
		}
	}
	eng, err := pipeline.LoadEngines(cfg, log)
	if err != nil {
		return err
	}
	defer eng.Close()
	// The history must outlive Ctrl-C (which cancels ctx) long enough to store the
	// interrupted reply and save the session; Close stops it.
	persist := context.WithoutCancel(ctx)
	store, err := pipeline.NewStore(persist, cfg, eng, opts.SessionDir, log)
	if err != nil {
		return err
	}
	defer store.Close()
	c, err := newChat(persist, chatConfig{
		Config: cfg, Engine: eng.LLM, Tokenizer: eng.Tokenizer, Context: eng.Context, Store: store,
		SessionDir: opts.SessionDir, Think: opts.Think, Out: opts.Out, Err: opts.Err, Log: log, Interactive: opts.Interactive,
		OnInterrupt: opts.OnInterrupt,
	})
	if err != nil {
		return err
	}
	if opts.SystemPrompt != nil && cfg.Session.Resume {
		if _, err := store.SetSystemPrompt(persist, *opts.SystemPrompt); err != nil {
			return err
		}
	}
	return c.run(ctx, opts.In)
}

// chatEngine is what the chat needs of an LLM engine (llm.Engine has it).
type chatEngine interface {
	Generate(ctx context.Context, req llm.Request, emit func(piece string) error) (llm.Result, error)
}

// chatConfig is what a chat is made of.
type chatConfig struct {
	Config pipeline.Config
	Engine chatEngine
	// Tokenizer counts prompt tokens (nil: counts unknown); Context is the model's
	// context in tokens (0: unknown, no fitting of the self-ask prompt).
	Tokenizer dialogue.Tokenizer
	Context   int
	Store     *dialogue.Store
	// SessionDir is where /save and the end of the chat save ("" for no saving).
	SessionDir  string
	Think       bool
	Out, Err    io.Writer
	Log         *zap.Logger
	Interactive bool
	// OnInterrupt, when set, routes Ctrl-C to f until the returned function is called;
	// a reply uses it so that Ctrl-C stops the reply, not the chat.
	OnInterrupt func(f func()) (restore func())
}

// chat is one text conversation. Only the goroutine in run uses it.
type chat struct {
	chatConfig
	roles    dialogue.Roles
	request  llm.Request // the reply request without its prompt and stop patterns
	selfAsk  protocol.SelfAsk
	nextTurn int // the turn id of the user's next line
	// persist is for storing and saving: it is not cancelled by Ctrl-C, so what was
	// printed before an interruption is still stored.
	persist context.Context
}

func newChat(persist context.Context, cc chatConfig) (*chat, error) {
	if cc.Log == nil {
		cc.Log = zap.NewNop()
	}
	h, err := cc.Store.Snapshot(persist)
	if err != nil {
		return nil, err
	}
	l := cc.Config.LLM
	c := &chat{
		chatConfig: cc,
		roles:      dialogue.RolesOf(h.Format()),
		request: llm.Request{MaxTokens: l.MaxTokens, Sampling: llm.Sampling{
			Temperature: l.Temperature, TopK: l.TopK, TopP: l.TopP, MinP: l.MinP, RepeatPenalty: l.RepeatPenalty, Seed: l.Seed,
		}},
		nextTurn: 1,
		persist:  persist,
	}
	// Turn ids continue after a resumed session's; like the voice agent's manager, the
	// user's line and the agent's reply get one id each.
	for _, u := range h.Utterances() {
		c.nextTurn = max(c.nextTurn, u.TurnID+1)
	}
	c.selfAsk = protocol.NewSelfAsk()
	return c, nil
}

// chatLine is one line of input, or the error that ended the input (io.EOF at its end).
type chatLine struct {
	text string
	err  error
}

// maxChatLineBytes bounds one input line (a pasted text, not a file).
const maxChatLineBytes = 1 << 20

// run reads lines from in until EOF, /quit or ctx's end (Ctrl-C), answering each, and
// saves the session at the end.
func (c *chat) run(ctx context.Context, in io.Reader) (err error) {
	lines := make(chan chatLine)
	stop := make(chan struct{})
	defer close(stop)
	// Reading has its own goroutine so that Ctrl-C ends the chat while it waits for a
	// line; a blocked read of a terminal is abandoned to the process's exit.
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 4096), maxChatLineBytes)
		for sc.Scan() {
			select {
			case lines <- chatLine{text: sc.Text()}:
			case <-stop:
				return
			}
		}
		end := sc.Err()
		if end == nil {
			end = io.EOF
		}
		if errors.Is(end, bufio.ErrTooLong) {
			end = &regularfile.TooLargeError{What: "a line", Limit: maxChatLineBytes}
		}
		select {
		case lines <- chatLine{err: end}:
		case <-stop:
		}
	}()
	defer func() {
		if serr := c.saveAtEnd(); serr != nil && err == nil {
			err = serr
		}
	}()

	if c.Interactive {
		fmt.Fprintf(c.Out, "Chatting with %s; /help lists the commands. Ctrl-D or /quit ends the chat; Ctrl-C stops a reply and ends it too, keeping what was printed.\n", c.roles.Agent)
	}
	for {
		if c.Interactive {
			fmt.Fprintf(c.Out, "%s> ", c.roles.User)
		}
		var l chatLine
		select {
		case l = <-lines:
		case <-ctx.Done():
			if c.Interactive {
				fmt.Fprintln(c.Out) // end the prompt's line
			}
			return nil
		}
		if errors.Is(l.err, io.EOF) {
			if c.Interactive {
				fmt.Fprintln(c.Out)
			}
			return nil
		}
		if l.err != nil {
			return fmt.Errorf("reading input: %w", l.err)
		}
		text := strings.TrimSpace(l.text)
		switch {
		case text == "":
			continue
		case strings.HasPrefix(text, "//"):
			text = text[1:] // a line that starts with "/" on purpose
		case strings.HasPrefix(text, "/"):
			quit, err := c.command(ctx, text)
			if err != nil || quit {
				return err
			}
			continue
		}
		if err := c.exchange(ctx, text); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // Ctrl-C during the reply ends the chat once it is stored
		}
	}
}

// saveAtEnd saves the session when the chat ends, unless there is nothing to save.
func (c *chat) saveAtEnd() error {
	if c.SessionDir == "" {
		return nil
	}
	h, err := c.Store.Snapshot(c.persist)
	if err != nil {
		return err
	}
	if h.Len() == 0 && h.SystemPrompt() == h.InitialSystemPrompt() {
		return nil // an empty new session is not worth a directory
	}
	if err := c.Store.Save(c.persist, c.SessionDir, nil); err != nil {
		return fmt.Errorf("saving the session: %w", err)
	}
	fmt.Fprintf(c.Err, "session saved in %s\n", c.SessionDir)
	return nil
}

const chatHelp = `commands:
  /system [TEXT]  show the system prompt, or change it to TEXT (prints the previous one)
  /reset          go back to the initial system prompt
  /history        show the stored conversation with turn ids
  /prompt         show the exact prompt the next reply would get, with its token count
  /save           save the session now
  /help           this list
  /quit           end the chat (as does end of input, Ctrl-D)
A line starting with "//" is sent as text starting with "/".
`

// command runs a slash command; quit reports /quit.
func (c *chat) command(ctx context.Context, text string) (quit bool, err error) {
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/quit", "/exit":
		return true, nil
	case "/system":
		if arg == "" {
			h, err := c.Store.Snapshot(c.persist)
			if err != nil {
				return false, err
			}
			fmt.Fprintf(c.Out, "system prompt: %q\n", h.SystemPrompt())
			return false, nil
		}
		prev, err := c.Store.SetSystemPrompt(c.persist, arg)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(c.Out, "system prompt changed to %q (it was %q)\n", arg, prev)
	case "/reset":
		prev, err := c.Store.ResetSystemPrompt(c.persist)
		if err != nil {
			return false, err
		}
		h, err := c.Store.Snapshot(c.persist)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(c.Out, "system prompt reset to %q (it was %q)\n", h.SystemPrompt(), prev)
	case "/history":
		h, err := c.Store.Snapshot(c.persist)
		if err != nil {
			return false, err
		}
		if h.Len() == 0 {
			fmt.Fprintln(c.Out, "(no turns yet)")
			return false, nil
		}
		t := dialogue.Transcript{Roles: c.roles, InterruptedMark: " (interrupted)", TurnIDs: true}
		io.WriteString(c.Out, t.Encode(h.Utterances()))
	case "/prompt":
		fp, err := c.Store.Prompt(ctx, c.nextTurn)
		if err != nil {
			fmt.Fprintf(c.Err, "agent chat: building the prompt: %v\n", err)
			return false, nil
		}
		tokens := "unknown"
		if fp.Tokens > 0 {
			tokens = fmt.Sprint(fp.Tokens)
		} else if c.Tokenizer != nil {
			if n, err := c.Tokenizer.CountTokens(fp.Text); err == nil {
				tokens = fmt.Sprint(n)
			}
		}
		// The next reply's prompt is this one with your next line before the cue.
		fmt.Fprintf(c.Out, "--- prompt as it stands: %s tokens, %d utterances shown, %d dropped to fit, stop %q ---\n%s\n--- end of prompt ---\n",
			tokens, fp.Utterances, fp.Dropped, fp.Stop, fp.Text)
	case "/save":
		if c.SessionDir == "" {
			fmt.Fprintln(c.Out, "sessions are off (no session.dir in the config)")
			return false, nil
		}
		if err := c.Store.Save(c.persist, c.SessionDir, nil); err != nil {
			return false, fmt.Errorf("saving the session: %w", err)
		}
		fmt.Fprintf(c.Out, "saved in %s\n", c.SessionDir)
	case "/help":
		io.WriteString(c.Out, chatHelp)
	default:
		fmt.Fprintf(c.Out, "unknown command %s\n%s", name, chatHelp)
	}
	return false, nil
}

// exchange stores the user's line and answers it. Its error ends the chat (the output
// or the history failed); a failing model is reported and the chat goes on.
func (c *chat) exchange(ctx context.Context, text string) error {
	userTurn := c.nextTurn
	agentTurn := userTurn + 1
	c.nextTurn += 2
	now := time.Now()
	if err := c.Store.AppendUtterance(c.persist, dialogue.Utterance{Speaker: dialogue.User, Text: text, TurnID: userTurn, Start: now, End: now}); err != nil {
		return fmt.Errorf("storing your line: %w", err)
	}
	// Ctrl-C while the model answers stops the answer; the chat goes on.
	replyCtx, stopReply := context.WithCancel(ctx)
	defer stopReply()
	if c.OnInterrupt != nil {
		defer c.OnInterrupt(stopReply)()
	}
	if c.Think {
		done, err := c.thinkReply(replyCtx, agentTurn)
		if done || err != nil {
			return err
		}
	}
	return c.reply(replyCtx, agentTurn)
}

// reply streams the model's reply to agent turn turnID and stores what was printed.
func (c *chat) reply(ctx context.Context, turnID int) error {
	fp, err := c.Store.Prompt(ctx, turnID)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(c.Out, "[interrupted]")
			return nil
		}
		fmt.Fprintf(c.Err, "agent chat: building the prompt of turn %d: %v\n", turnID, err)
		return nil
	}
	req := c.request
	req.Prompt, req.Stop = fp.Text, fp.Stop
	var filter dialogue.StreamTransform
	if words := c.Config.Dialogue.RemoveWords; len(words) > 0 {
		filter = dialogue.NewKeywordFilter(words...)
	}
	if _, err := fmt.Fprintf(c.Out, "%s: ", c.roles.Agent); err != nil {
		return err
	}
	var printed strings.Builder
	var start time.Time
	var outErr error
	show := func(text string) error {
		if printed.Len() == 0 {
			text = strings.TrimLeft(text, " \t\r\n") // the cue's space, not the reply's
		}
		if text == "" {
			return nil
		}
		if start.IsZero() {
			start = time.Now()
		}
		if _, err := io.WriteString(c.Out, text); err != nil {
			outErr = err
			return err
		}
		printed.WriteString(text)
		return nil
	}
	res, genErr := c.Engine.Generate(ctx, req, func(piece string) error {
		if filter != nil {
			piece = filter.Push(piece)
		}
		return show(piece)
	})
	if outErr != nil {
		return fmt.Errorf("writing the reply: %w", outErr)
	}
	cancelled := genErr != nil && ctx.Err() != nil
	if !cancelled && filter != nil {
		// The filter's held-back text was generated: show it, unless Ctrl-C asked to stop
		// at once.
		if err := show(filter.Flush()); err != nil {
			return fmt.Errorf("writing the reply: %w", err)
		}
	}
	u := dialogue.Utterance{Speaker: dialogue.Agent, TurnID: turnID, Text: strings.TrimSpace(printed.String()), Start: start, End: time.Now()}
	switch {
	case cancelled:
		fmt.Fprintln(c.Out, " [interrupted]")
		u.Interrupted = true
	case genErr != nil && u.Text == "":
		fmt.Fprintln(c.Out, "[failed]")
		fmt.Fprintf(c.Err, "agent chat: the model failed before it wrote anything (%v); your line is kept and goes with your next one\n", genErr)
	case genErr != nil:
		fmt.Fprintln(c.Out, " [failed]")
		fmt.Fprintf(c.Err, "agent chat: the model failed during the reply (%v); what it wrote is kept as an interrupted turn\n", genErr)
		u.Interrupted = true
	default:
		fmt.Fprintln(c.Out)
	}
	c.Log.Debug("reply", zap.Int("turn", turnID), zap.String("stop", res.StopReason), zap.Int("tokens", res.Tokens),
		zap.Int("prompt_tokens", res.PromptTokens), zap.Int("cached_tokens", res.CachedTokens))
	if u.Text == "" {
		// Like a reply nobody heard in the voice agent: nothing to remember. The user's
		// line stays, and the next prompt joins it with their next one (see
		// dialogue's prompts).
		return nil
	}
	// The user saw exactly what was printed, so an interrupted reply is stored as it
	// stands (not cut back at a word as a spoken one is).
	if err := c.Store.AppendUtterance(c.persist, u); err != nil {
		return fmt.Errorf("storing the reply: %w", err)
	}
	return nil
}

// thinkReply answers agent turn turnID with the self-ask protocol: the model reasons
// with follow-up questions and only its final answer is printed and stored. done is
// false when the protocol found no answer (a model that does not follow it, or a prompt
// too long for the context): the caller then asks for a plain reply.
func (c *chat) thinkReply(ctx context.Context, turnID int) (done bool, err error) {
	pad, proto, err := c.selfAskPad(ctx, turnID)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(c.Out, "[interrupted]")
		return true, nil
	case err != nil:
		fmt.Fprintf(c.Err, "agent chat: cannot think (%v); answering directly\n", err)
		return false, nil
	}
	comp := &chatCompleter{engine: c.Engine, sampling: c.request.Sampling}
	res, err := proto.Run(ctx, comp, pad, protocol.RunOptions{MaxTokens: c.request.MaxTokens})
	var engErr *chatEngineError
	switch {
	case err != nil && ctx.Err() != nil:
		// Nothing of the turn was printed, so nothing is stored.
		fmt.Fprintln(c.Out, "[interrupted while thinking]")
		return true, nil
	case errors.As(err, &engErr) && !errors.Is(err, llm.ErrPromptTooLong):
		fmt.Fprintf(c.Err, "agent chat: the model failed while thinking: %v\n", engErr.err)
		return true, nil
	case err != nil:
		// ErrNoDecision (the model's text follows no self-ask step), the follow-up limit,
		// or a scratchpad that outgrew the context.
		fmt.Fprintf(c.Err, "agent chat: thinking gave no final answer (%v); answering directly\n", err)
		return false, nil
	}
	for _, f := range res.FollowUps {
		c.Log.Debug("thought", zap.Int("turn", turnID), zap.String("follow_up", f.Question), zap.String("answer", f.Answer))
	}
	answer := strings.TrimSpace(res.Answer)
	if words := c.Config.Dialogue.RemoveWords; len(words) > 0 {
		f := dialogue.NewKeywordFilter(words...)
		answer = strings.TrimSpace(f.Push(answer) + f.Flush())
	}
	if answer == "" {
		fmt.Fprintln(c.Err, "agent chat: thinking gave an empty answer; answering directly")
		return false, nil
	}
	if _, err := fmt.Fprintf(c.Out, "%s: %s\n", c.roles.Agent, answer); err != nil {
		return true, fmt.Errorf("writing the reply: %w", err)
	}
	now := time.Now()
	u := dialogue.Utterance{Speaker: dialogue.Agent, TurnID: turnID, Text: answer, Start: now, End: now}
	if err := c.Store.AppendUtterance(c.persist, u); err != nil {
		return true, fmt.Errorf("storing the reply: %w", err)
	}
	return true, nil
}

// selfAskPad builds the self-ask scratchpad for agent turn turnID: the user's last line
// is the question, the conversation before it (after the memory's summary) the context,
// and the system prompt leads the template. The oldest lines of the context are dropped
// until the first step's prompt leaves room for the reply in the model's context.
func (c *chat) selfAskPad(ctx context.Context, turnID int) (protocol.Scratchpad, protocol.SelfAsk, error) {
	h, err := c.Store.Snapshot(c.persist)
	if err != nil {
		return protocol.Scratchpad{}, protocol.SelfAsk{}, err
	}
	mem, err := c.Store.MemoryState(c.persist)
	if err != nil {
		return protocol.Scratchpad{}, protocol.SelfAsk{}, err
	}
	proto := c.selfAsk
	if sys := strings.TrimSpace(h.SystemPrompt()); sys != "" {
		escaped := strings.NewReplacer("{", "{{", "}", "}}").Replace(sys)
		t, err := protocol.ParseTemplate(escaped + "\n\n" + protocol.DefaultSelfAskTemplate)
		if err != nil {
			return protocol.Scratchpad{}, protocol.SelfAsk{}, err
		}
		proto.Template = t
	}
	utts := h.Utterances()
	var question string
	var before []dialogue.Utterance
	for i, u := range utts {
		if u.TurnID >= turnID {
			break
		}
		if i >= mem.Covered {
			before = append(before, u)
		}
	}
	if n := len(before); n > 0 && before[n-1].Speaker == dialogue.User {
		question = before[n-1].Text
		before = before[:n-1]
	}
	if strings.TrimSpace(question) == "" {
		return protocol.Scratchpad{}, protocol.SelfAsk{}, errors.New("no question to think about")
	}
	t := dialogue.Transcript{Roles: c.roles, InterruptedMark: " (interrupted)"}
	pad := protocol.Scratchpad{Question: question}
	for {
		pad.Context = t.Encode(before)
		if s := strings.TrimSpace(mem.Summary); s != "" {
			pad.Context = dialogue.DefaultSummaryLabel + "\n" + s + "\n\n" + pad.Context
		}
		if c.Tokenizer == nil || c.Context <= 0 {
			return pad, proto, nil
		}
		prompt, _, err := proto.Encode(pad)
		if err != nil {
			return protocol.Scratchpad{}, protocol.SelfAsk{}, err
		}
		n, err := c.Tokenizer.CountTokens(prompt)
		if err != nil {
			return protocol.Scratchpad{}, protocol.SelfAsk{}, fmt.Errorf("counting tokens: %w", err)
		}
		budget := c.Context - max(c.Config.Dialogue.ReplyReserve, c.request.MaxTokens)
		if n <= budget {
			return pad, proto, nil
		}
		if len(before) == 0 && mem.Summary == "" {
			return protocol.Scratchpad{}, protocol.SelfAsk{}, fmt.Errorf("%w: the self-ask prompt takes %d tokens, %d are left for it", llm.ErrPromptTooLong, n, budget)
		}
		if len(before) == 0 {
			mem.Summary = ""
			continue
		}
		if err := ctx.Err(); err != nil {
			return protocol.Scratchpad{}, protocol.SelfAsk{}, err
		}
		before = before[1:]
	}
}

// chatEngineError marks an error of the engine itself inside a self-ask run, so that it is
// told apart from the protocol finding no answer.
type chatEngineError struct{ err error }

func (e *chatEngineError) Error() string { return e.err.Error() }
func (e *chatEngineError) Unwrap() error { return e.err }

// chatCompleter lets the self-ask protocol use the chat's engine.
type chatCompleter struct {
	engine   chatEngine
	sampling llm.Sampling
}

func (c *chatCompleter) Complete(ctx context.Context, prompt string, maxTokens int, stop []string) (string, error) {
	res, err := c.engine.Generate(ctx, llm.Request{Prompt: prompt, MaxTokens: maxTokens, Stop: stop, Sampling: c.sampling}, func(string) error { return nil })
	if err != nil {
		return res.Text, &chatEngineError{err: err}
	}
	return res.Text, nil
}
