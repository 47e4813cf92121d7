// Package llmtest holds what the tests of the LLM module and of its engines share: the
// stories260K test model, a real llama-server process, and a harness that drives the LLM
// module as the dialogue manager does. It is pure Go; the tests of the in-process engine
// (package llamacpp) bring that engine along.
package llmtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/llm"
)

// StoriesPath returns the shared stories260K model.
func StoriesPath(t testing.TB) string {
	t.Helper()
	return testenv.SharedFile(t, "models/stories260K.gguf")
}

// Tail returns the last n bytes of s (for quoting logs).
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Collect runs Generate and returns the emitted pieces; it fails the test when the
// generation fails or its Result.Text is not what was emitted.
func Collect(t testing.TB, e llm.Engine, req llm.Request) ([]string, llm.Result) {
	t.Helper()
	var pieces []string
	res, err := e.Generate(context.Background(), req, func(p string) error {
		pieces = append(pieces, p)
		return nil
	})
	if err != nil {
		t.Fatalf("Generate(%q): %v", req.Prompt, err)
	}
	if got := strings.Join(pieces, ""); got != res.Text {
		t.Errorf("emitted %q but Result.Text = %q", got, res.Text)
	}
	return pieces, res
}

// NewHTTPEngine returns an HTTP engine that is closed when the test ends.
func NewHTTPEngine(t testing.TB, cfg llm.HTTPConfig) *llm.HTTPEngine {
	t.Helper()
	e, err := llm.NewHTTPEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// LlamaServer is a real llama-server process serving stories260K for a test.
type LlamaServer struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
	log  string
}

// freePort asks the kernel for a free TCP port on the loopback interface.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartLlamaServer starts llama-server on port (0: a free one), waits until /health
// answers, and kills it when the test ends.
func StartLlamaServer(t testing.TB, port int) *LlamaServer {
	t.Helper()
	bin := testenv.Command(t, "llama-server", testenv.EnvFix)
	model := StoriesPath(t)
	if port == 0 {
		port = freePort(t)
	}
	logPath := filepath.Join(t.TempDir(), "llama-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-c", "512", "-np", "1", "-t", "1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start llama-server: %v", err)
	}
	s := &LlamaServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(s.Kill)
	if err := s.waitHealthy(30 * time.Second); err != nil {
		s.Kill()
		data, _ := os.ReadFile(logPath)
		t.Fatalf("llama-server on port %d: %v\n%s", port, err, Tail(string(data), 3000))
	}
	return s
}

func (s *LlamaServer) waitHealthy(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %v", limit)
		case <-tick.C:
		}
	}
}

// Kill stops the server at once (SIGKILL, as a crash would) and waits for it.
func (s *LlamaServer) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

// Prompts is a PromptBuilder for tests: a fixed prompt (and stops) per turn. It is safe
// for concurrent use.
type Prompts struct {
	mu    sync.Mutex
	turns map[int]string
	stop  []string
	err   error
	calls []int
}

// NewPrompts returns a builder with the prompts of turns and stop strings stop.
func NewPrompts(turns map[int]string, stop ...string) *Prompts {
	return &Prompts{turns: turns, stop: stop}
}

// FailingPrompts returns a builder that fails every call with err.
func FailingPrompts(err error) *Prompts { return &Prompts{err: err} }

// BuildPrompt implements llm.PromptBuilder.
func (b *Prompts) BuildPrompt(ctx context.Context, turnID int) (string, []string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, turnID)
	if b.err != nil {
		return "", nil, b.err
	}
	p, ok := b.turns[turnID]
	if !ok {
		return "", nil, fmt.Errorf("no prompt for turn %d", turnID)
	}
	return p, b.stop, nil
}

// Set sets the prompt of turn turnID.
func (b *Prompts) Set(turnID int, prompt string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.turns[turnID] = prompt
}

// Prompt returns the prompt of turn turnID.
func (b *Prompts) Prompt(turnID int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.turns[turnID]
}

// Calls returns the turns BuildPrompt was asked for, in order.
func (b *Prompts) Calls() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.calls...)
}

// Controller drives the LLM module like the dialogue manager: it sends control commands
// and records everything the module sends back.
type Controller struct {
	Ports   *iu.Ports
	Ups     []iu.Update
	Replies []llm.Reply
}

// Send sends a control command about turn turnID.
func (c *Controller) Send(ctx context.Context, a control.Action, turnID int) error {
	u := c.Ports.NewIU(control.Command{Action: a, TurnID: turnID, Reason: "test"})
	return c.Ports.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

// Until records updates until done returns true for one of them.
func (c *Controller) Until(ctx context.Context, done func(iu.Update) bool) error {
	return c.record(ctx, time.Time{}, done)
}

// Wait records updates until d has passed on the network's clock.
func (c *Controller) Wait(ctx context.Context, d time.Duration) error {
	return c.record(ctx, c.Ports.Now().Add(d), func(iu.Update) bool { return false })
}

// record records updates until done returns true for one of them or, when deadline is
// not zero, until the network's clock reaches it.
func (c *Controller) record(ctx context.Context, deadline time.Time, done func(iu.Update) bool) error {
	for {
		ev, err := c.Ports.Next(ctx, deadline)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventDeadline:
			return nil
		case iu.EventInputDone:
			return errors.New("the LLM module finished early")
		case iu.EventMessage:
			hit := false
			for _, up := range ev.Message.Updates {
				c.Ups = append(c.Ups, up)
				if r, ok := up.IU.Payload.(llm.Reply); ok && up.Type == iu.Commit {
					c.Replies = append(c.Replies, r)
				}
				hit = hit || done(up)
			}
			if hit {
				return nil
			}
		}
	}
}

// ReplyOf selects the commit of turn turnID's reply.
func ReplyOf(turnID int) func(iu.Update) bool {
	return func(up iu.Update) bool {
		r, ok := up.IU.Payload.(llm.Reply)
		return ok && up.Type == iu.Commit && r.TurnID == turnID && !r.Withdrawn
	}
}

// WithdrawnReplyOf selects the commit of a withdrawn prepared turn's reply.
func WithdrawnReplyOf(turnID int) func(iu.Update) bool {
	return func(up iu.Update) bool {
		r, ok := up.IU.Payload.(llm.Reply)
		return ok && up.Type == iu.Commit && r.TurnID == turnID && r.Withdrawn
	}
}

// RunNetwork runs the LLM module with a controller script (on clk, or the real clock
// when it is nil) and returns what the controller saw.
func RunNetwork(t *testing.T, clk clock.Clock, mod *llm.Module, script func(ctx context.Context, c *Controller) error) *Controller {
	t.Helper()
	c := &Controller{}
	ctrl := iu.ModuleFunc{ModuleName: "manager", Fn: func(ctx context.Context, p *iu.Ports) error {
		c.Ports = p
		return script(ctx, c)
	}}
	opts := []iu.Option{}
	if clk != nil {
		opts = append(opts, iu.WithClock(clk))
	}
	net := iu.NewNetwork(opts...)
	if err := net.Add(ctrl, mod); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(ctrl, mod); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(mod, ctrl); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatalf("network: %v", err)
	}
	return c
}

// ClauseStory checks the clause IUs of one turn and returns their committed texts.
func ClauseStory(t *testing.T, ups []iu.Update, turnID int) (committed []string, revoked int) {
	t.Helper()
	type life struct {
		id       int
		added    bool
		final    iu.UpdateType
		lastFlag bool
	}
	lives := map[iu.ID]*life{}
	var order []iu.ID
	for _, up := range ups {
		c, ok := up.IU.Payload.(llm.Clause)
		if !ok || c.TurnID != turnID {
			continue
		}
		l := lives[up.IU.ID]
		if l == nil {
			l = &life{id: c.ClauseID}
			lives[up.IU.ID] = l
			order = append(order, up.IU.ID)
		}
		switch up.Type {
		case iu.Add:
			if l.added {
				t.Errorf("clause %s added twice", up.IU.ID)
			}
			l.added = true
		case iu.Commit:
			committed = append(committed, c.Text)
			l.final, l.lastFlag = iu.Commit, c.Last
			if c.Text == "" || strings.TrimSpace(c.Text) != c.Text {
				t.Errorf("committed clause %q is empty or untrimmed", c.Text)
			}
		case iu.Revoke:
			revoked++
			l.final = iu.Revoke
		}
		if c.ClauseID != l.id {
			t.Errorf("clause %s changed its id from %d to %d", up.IU.ID, l.id, c.ClauseID)
		}
	}
	for i, id := range order {
		l := lives[id]
		if l.id != i {
			t.Errorf("clause %d has id %d", i, l.id)
		}
		if l.final == 0 {
			t.Errorf("clause %s (%d) was neither committed nor revoked", id, l.id)
		}
		if l.lastFlag && i != len(order)-1 {
			t.Errorf("clause %d is marked last but is not", i)
		}
	}
	return committed, revoked
}
