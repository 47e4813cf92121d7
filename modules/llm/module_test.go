package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
)

// prompts is a PromptBuilder for tests: a fixed prompt (and stops) per turn.
type prompts struct {
	mu    sync.Mutex
	turns map[int]string
	stop  []string
	err   error
	calls []int
}

func (b *prompts) BuildPrompt(ctx context.Context, turnID int) (string, []string, error) {
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

// controller drives the LLM module like the dialogue manager: it sends control commands
// and records everything the module sends back.
type controller struct {
	p       *iu.Ports
	ups     []iu.Update
	replies []Reply
}

func (c *controller) send(ctx context.Context, a control.Action, turnID int) error {
	u := c.p.NewIU(control.Command{Action: a, TurnID: turnID, Reason: "test"})
	return c.p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
}

// until records updates until done returns true for one of them.
func (c *controller) until(ctx context.Context, done func(iu.Update) bool) error {
	for {
		ev, err := c.p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventInputDone:
			return errors.New("the LLM module finished early")
		case iu.EventMessage:
			hit := false
			for _, up := range ev.Message.Updates {
				c.ups = append(c.ups, up)
				if r, ok := up.IU.Payload.(Reply); ok && up.Type == iu.Commit {
					c.replies = append(c.replies, r)
				}
				hit = hit || done(up)
			}
			if hit {
				return nil
			}
		}
	}
}

func replyOf(turnID int) func(iu.Update) bool {
	return func(up iu.Update) bool {
		r, ok := up.IU.Payload.(Reply)
		return ok && up.Type == iu.Commit && r.TurnID == turnID
	}
}

// runNetwork runs the LLM module with a controller script and returns what it saw.
func runNetwork(t *testing.T, clk clock.Clock, mod *Module, script func(ctx context.Context, c *controller) error) *controller {
	t.Helper()
	c := &controller{}
	ctrl := iu.ModuleFunc{ModuleName: "manager", Fn: func(ctx context.Context, p *iu.Ports) error {
		c.p = p
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

// clauseStory checks the clause IUs of one turn and returns their committed texts.
func clauseStory(t *testing.T, ups []iu.Update, turnID int) (committed []string, revoked int) {
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
		c, ok := up.IU.Payload.(Clause)
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
			e := newEngine(t, m, LlamaConfig{})
			first := "Once upon a time"
			pb := &prompts{turns: map[int]string{1: first}}
			mod := NewModule("llm", e, pb, Config{MaxTokens: 60})
			c := runNetwork(t, clk.c(), mod, func(ctx context.Context, c *controller) error {
				if err := c.send(ctx, control.Respond, 1); err != nil {
					return err
				}
				if err := c.until(ctx, replyOf(1)); err != nil {
					return err
				}
				// The next turn continues the story: the engine reuses its cache.
				pb.mu.Lock()
				pb.turns[2] = first + c.replies[0].Text + " Then"
				pb.mu.Unlock()
				if err := c.send(ctx, control.Respond, 2); err != nil {
					return err
				}
				return c.until(ctx, replyOf(2))
			})
			if len(c.replies) != 2 {
				t.Fatalf("%d replies", len(c.replies))
			}
			for i, r := range c.replies {
				committed, revoked := clauseStory(t, c.ups, r.TurnID)
				if revoked != 0 || r.Interrupted || r.Err != "" {
					t.Errorf("turn %d: revoked %d, interrupted %v, err %q", r.TurnID, revoked, r.Interrupted, r.Err)
				}
				if len(committed) < 2 || strings.Join(committed, "|") != strings.Join(r.Clauses, "|") {
					t.Errorf("turn %d: committed %q, reply clauses %q", r.TurnID, committed, r.Clauses)
				}
				if noSpace(strings.Join(committed, "")) != noSpace(r.Text) {
					t.Errorf("turn %d: clauses %q do not add up to the reply %q", r.TurnID, committed, r.Text)
				}
				want := fresh(t, m, Request{Prompt: pb.turns[r.TurnID], MaxTokens: 60})
				if r.Text != want.Text || r.Result.Tokens != 60 || r.Result.StopReason != StopLength {
					t.Errorf("turn %d: %q (%d tokens, %s), want %q", r.TurnID, r.Text, r.Result.Tokens, r.Result.StopReason, want.Text)
				}
				if i == 1 && r.Result.CachedTokens < c.replies[0].Result.PromptTokens {
					t.Errorf("turn 2 reused only %d tokens", r.Result.CachedTokens)
				}
				if clk.name == "real clock" && (r.TimeToFirstToken <= 0 || r.TimeToFirstClause < r.TimeToFirstToken) {
					t.Errorf("turn %d: time to first token %v, first clause %v", r.TurnID, r.TimeToFirstToken, r.TimeToFirstClause)
				}
			}
			// The last committed clause of each turn carries Last.
			for _, up := range c.ups {
				if cl, ok := up.IU.Payload.(Clause); ok && up.Type == iu.Commit && cl.Last {
					if cl.ClauseID != len(c.replies[cl.TurnID-1].Clauses)-1 {
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
	e := newEngine(t, m, LlamaConfig{})
	pb := &prompts{turns: map[int]string{1: "Once upon a time", 2: "The little dog"}}
	mod := NewModule("llm", e, pb, Config{MaxTokens: 300})
	var interruptAt int
	c := runNetwork(t, nil, mod, func(ctx context.Context, c *controller) error {
		if err := c.send(ctx, control.Respond, 1); err != nil {
			return err
		}
		// Interrupt as soon as the first clause is committed and the next one started.
		err := c.until(ctx, func(up iu.Update) bool {
			cl, ok := up.IU.Payload.(Clause)
			return ok && up.Type == iu.Add && cl.ClauseID == 1
		})
		if err != nil {
			return err
		}
		interruptAt = len(c.ups)
		if err := c.send(ctx, control.Interrupt, 1); err != nil {
			return err
		}
		if err := c.until(ctx, replyOf(1)); err != nil {
			return err
		}
		if err := c.send(ctx, control.Respond, 2); err != nil {
			return err
		}
		return c.until(ctx, replyOf(2))
	})
	r1 := c.replies[0]
	if !r1.Interrupted || r1.Err != "" || r1.Result.StopReason != StopCancelled {
		t.Errorf("turn 1 reply: interrupted %v, err %q, stop %q", r1.Interrupted, r1.Err, r1.Result.StopReason)
	}
	// The interrupt was sent once the second clause had started; the generation may have
	// run on a little until the module read it (this tiny model writes thousands of tokens
	// a second), but what was committed is what the reply keeps, and the clause that was
	// still open is revoked.
	committed, revoked := clauseStory(t, c.ups, 1)
	if len(committed) < 1 || len(committed) != len(r1.Clauses) || revoked > 1 {
		t.Errorf("turn 1: %d committed (%q), reply keeps %d, %d revoked", len(committed), committed, len(r1.Clauses), revoked)
	}
	if full := fresh(t, m, Request{Prompt: "Once upon a time", MaxTokens: 300}).Text; len(r1.Text) >= len(full) {
		t.Errorf("the interrupted reply holds the whole generation (%d bytes)", len(full))
	}
	// After the interrupt: clause updates already in flight, then the revoke and the
	// reply; nothing about turn 1 after the reply.
	replied := false
	for _, up := range c.ups[interruptAt:] {
		if cl, ok := up.IU.Payload.(Clause); ok && cl.TurnID == 1 && replied {
			t.Errorf("clause update %s %q after the interrupted reply", up.Type, cl.Text)
		}
		if replyOf(1)(up) {
			replied = true
		}
	}
	if !strings.HasPrefix(fresh(t, m, Request{Prompt: "Once upon a time", MaxTokens: 300}).Text, r1.Text) {
		t.Errorf("interrupted text %q is not a prefix of the full generation", r1.Text)
	}
	if r2 := c.replies[1]; r2.Interrupted || r2.Text != fresh(t, m, Request{Prompt: "The little dog", MaxTokens: 300}).Text {
		t.Errorf("turn 2 after the interrupt: %+v", r2)
	}
}

// TestModuleStopPatterns: the prompt builder's stop strings cut the reply; the cut text
// is never spoken.
func TestModuleStopPatterns(t *testing.T) {
	m := loadStories(t)
	e := newEngine(t, m, LlamaConfig{})
	full := fresh(t, m, Request{Prompt: "Once upon a time", MaxTokens: 80}).Text
	cut := strings.Index(full, "Lily")
	if cut < 0 {
		t.Fatalf("test assumes the story mentions Lily: %q", full)
	}
	pb := &prompts{turns: map[int]string{1: "Once upon a time"}, stop: []string{"Lily"}}
	mod := NewModule("llm", e, pb, Config{MaxTokens: 80, Clauses: ClauseConfig{MinWords: 1}})
	c := runNetwork(t, nil, mod, func(ctx context.Context, c *controller) error {
		if err := c.send(ctx, control.Respond, 1); err != nil {
			return err
		}
		return c.until(ctx, replyOf(1))
	})
	r := c.replies[0]
	if r.Text != full[:cut] || r.Result.StopReason != StopString {
		t.Errorf("reply %q (%s), want %q", r.Text, r.Result.StopReason, full[:cut])
	}
	for _, up := range c.ups {
		if cl, ok := up.IU.Payload.(Clause); ok && strings.Contains(cl.Text, "Lily") {
			t.Errorf("clause %q contains the stop string", cl.Text)
		}
	}
}

// killAfter wraps an engine and kills a llama-server after n pieces of one generation,
// the way a crash would hit a real conversation.
type killAfter struct {
	Engine
	srv *llamaServer
	n   int
}

func (k killAfter) Generate(ctx context.Context, req Request, emit func(string) error) (Result, error) {
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
	srv := startLlamaServer(t, 0)
	httpEngine := newHTTPEngine(t, HTTPConfig{URL: srv.URL, ConnectRetries: 20, RetryDelay: 50 * time.Millisecond})
	pb := &prompts{turns: map[int]string{1: "Once upon a time", 2: "The little dog"}}
	mod := NewModule("llm", killAfter{Engine: httpEngine, srv: srv, n: 40}, pb, Config{MaxTokens: 200})
	c := runNetwork(t, nil, mod, func(ctx context.Context, c *controller) error {
		if err := c.send(ctx, control.Respond, 1); err != nil {
			return err
		}
		if err := c.until(ctx, replyOf(1)); err != nil {
			return err
		}
		// The server comes back on the same port; the engine's connect retries find it.
		startLlamaServer(t, srv.Port)
		if err := c.send(ctx, control.Respond, 2); err != nil {
			return err
		}
		return c.until(ctx, replyOf(2))
	})
	r1 := c.replies[0]
	if r1.Err == "" || !strings.Contains(r1.Err, "stream ended") || r1.Interrupted {
		t.Errorf("turn 1: err %q, interrupted %v", r1.Err, r1.Interrupted)
	}
	if r1.Text == "" || !strings.HasPrefix(fresh(t, loadStories(t), Request{Prompt: "Once upon a time", MaxTokens: 200}).Text, r1.Text) {
		t.Errorf("turn 1 partial text %q", r1.Text)
	}
	committed, _ := clauseStory(t, c.ups, 1)
	for _, cl := range committed {
		if !strings.Contains(r1.Text, cl) {
			t.Errorf("committed clause %q is not in the reply", cl)
		}
	}
	t.Logf("turn 1 ended with: %s; %d clauses committed", r1.Err, len(committed))
	if r2 := c.replies[1]; r2.Err != "" || r2.Text == "" || r2.Result.Tokens != 200 {
		t.Errorf("turn 2 after the restart: err %q, %d tokens", r2.Err, r2.Result.Tokens)
	}
}

// script is an engine that emits fixed pieces, for checking the module's IU sequences
// exactly. The real engines are tested above.
type script struct {
	pieces []string
	err    error
	// hang makes the generation of this prompt stop after its first piece until it is
	// cancelled.
	hang string
}

func (s *script) Generate(ctx context.Context, req Request, emit func(string) error) (Result, error) {
	var sb strings.Builder
	for i, p := range s.pieces {
		if i == 1 && req.Prompt == s.hang {
			<-ctx.Done()
			return Result{Text: sb.String(), StopReason: StopCancelled}, ctx.Err()
		}
		if err := emit(p); err != nil {
			return Result{Text: sb.String(), StopReason: StopCancelled}, err
		}
		sb.WriteString(p)
	}
	if s.err != nil {
		return Result{Text: sb.String(), StopReason: StopError, Tokens: len(s.pieces)}, s.err
	}
	return Result{Text: sb.String(), StopReason: StopEOG, Tokens: len(s.pieces)}, nil
}

func (s *script) Close() error { return nil }

type upper struct{}

// Push upper-cases and drops asterisks, holding back nothing; Flush adds a marker so
// the test sees it called.
func (u *upper) Push(p string) string { return strings.ToUpper(strings.ReplaceAll(p, "*", "")) }
func (u *upper) Flush() string        { return " END." }

func describe(ups []iu.Update) []string {
	var out []string
	for _, up := range ups {
		switch p := up.IU.Payload.(type) {
		case Clause:
			last := ""
			if p.Last {
				last = " last"
			}
			out = append(out, fmt.Sprintf("%s %d %q%s", up.Type, p.ClauseID, p.Text, last))
		case Reply:
			out = append(out, fmt.Sprintf("%s reply %q", up.Type, p.Text))
		}
	}
	return out
}

func TestModuleUpdateSequence(t *testing.T) {
	tests := []struct {
		name   string
		engine *script
		cfg    Config
		want   []string
		err    string
	}{
		{"two sentences", &script{pieces: []string{"Hello", " there", ",", " my friend", ".", " How", " are you?"}}, Config{}, []string{
			`add 0 "Hello"`, `update 0 "Hello there"`, `update 0 "Hello there,"`,
			`commit 0 "Hello there,"`, `add 1 "my friend"`,
			`update 1 "my friend."`,
			`commit 1 "my friend."`, `add 2 "How"`,
			`update 2 "How are you?"`,
			`update 2 "How are you?" last`, `commit 2 "How are you?" last`,
			`add reply "Hello there, my friend. How are you?"`, `commit reply "Hello there, my friend. How are you?"`,
		}, ""},
		{"ends on a complete clause", &script{pieces: []string{"One two.", " Three four."}}, Config{}, []string{
			`add 0 "One two."`,
			`commit 0 "One two."`, `add 1 "Three four."`,
			`update 1 "Three four." last`, `commit 1 "Three four." last`,
			`add reply "One two. Three four."`, `commit reply "One two. Three four."`,
		}, ""},
		{"filter", &script{pieces: []string{"*waves* hi", " you"}}, Config{NewFilter: func() StreamFilter { return &upper{} }}, []string{
			`add 0 "WAVES HI"`, `update 0 "WAVES HI YOU"`,
			`update 0 "WAVES HI YOU END." last`, `commit 0 "WAVES HI YOU END." last`,
			`add reply "*waves* hi you"`, `commit reply "*waves* hi you"`,
		}, ""},
		{"engine fails", &script{pieces: []string{"All good.", " Then it bro"}, err: errors.New("connection reset")}, Config{}, []string{
			`add 0 "All good."`,
			`commit 0 "All good."`, `add 1 "Then it bro"`,
			`revoke 1 "Then it bro"`, `add reply "All good. Then it bro"`, `commit reply "All good. Then it bro"`,
		}, "connection reset"},
		{"engine fails after a complete clause", &script{pieces: []string{"All good. Fine", " here."}, err: errors.New("boom")}, Config{}, []string{
			`add 0 "All good."`, `commit 0 "All good."`, `add 1 "Fine"`,
			`update 1 "Fine here."`,
			`update 1 "Fine here." last`, `commit 1 "Fine here." last`,
			`add reply "All good. Fine here."`, `commit reply "All good. Fine here."`,
		}, "boom"},
		{"nothing generated", &script{}, Config{}, []string{`add reply ""`, `commit reply ""`}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pb := &prompts{turns: map[int]string{7: "p"}}
			mod := NewModule("llm", tc.engine, pb, tc.cfg)
			c := runNetwork(t, clock.NewVirtual(time.Unix(0, 0)), mod, func(ctx context.Context, c *controller) error {
				if err := c.send(ctx, control.Respond, 7); err != nil {
					return err
				}
				return c.until(ctx, replyOf(7))
			})
			got := describe(c.ups)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("updates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if r := c.replies[0]; !strings.Contains(r.Err, tc.err) || (tc.err == "") != (r.Err == "") {
				t.Errorf("reply error %q, want %q", r.Err, tc.err)
			}
		})
	}
}

func TestModulePromptError(t *testing.T) {
	pb := &prompts{err: errors.New("history unavailable")}
	mod := NewModule("llm", &script{pieces: []string{"never"}}, pb, Config{})
	c := runNetwork(t, nil, mod, func(ctx context.Context, c *controller) error {
		if err := c.send(ctx, control.Respond, 1); err != nil {
			return err
		}
		return c.until(ctx, replyOf(1))
	})
	if r := c.replies[0]; !strings.Contains(r.Err, "history unavailable") || r.Text != "" {
		t.Errorf("reply %+v", r)
	}
}

// TestModuleSupersedeAndInputEnd: a Respond for a new turn interrupts the turn in
// progress; when the input ends, the module finishes the turn in progress first.
func TestModuleSupersedeAndInputEnd(t *testing.T) {
	eng := &script{pieces: []string{"First words here,", " more words", " and more."}, hang: "a"}
	pb := &prompts{turns: map[int]string{1: "a", 2: "b"}}
	mod := NewModule("llm", eng, pb, Config{})
	c := &controller{}
	ctrl := iu.ModuleFunc{ModuleName: "manager", Fn: func(ctx context.Context, p *iu.Ports) error {
		c.p = p
		if err := c.send(ctx, control.Respond, 1); err != nil {
			return err
		}
		if err := c.until(ctx, func(up iu.Update) bool { return up.Type == iu.Add }); err != nil {
			return err
		}
		if err := c.send(ctx, control.Respond, 2); err != nil {
			return err
		}
		// Leave with turn 2 in progress: the module must finish it on its own.
		return c.until(ctx, replyOf(1))
	}}
	// A sink that outlives the manager records everything.
	var sinkUps []iu.Update
	sink := iu.ModuleFunc{ModuleName: "sink", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == iu.EventInputDone {
				return err
			}
			if ev.Kind == iu.EventMessage {
				sinkUps = append(sinkUps, ev.Message.Updates...)
			}
		}
	}}
	net := iu.NewNetwork()
	for _, err := range []error{net.Add(ctrl, mod, sink), net.Connect(ctrl, mod), net.Connect(mod, ctrl), net.Connect(mod, sink)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var replies []Reply
	for _, up := range sinkUps {
		if r, ok := up.IU.Payload.(Reply); ok && up.Type == iu.Commit {
			replies = append(replies, r)
		}
	}
	if len(replies) != 2 || !replies[0].Interrupted || replies[0].TurnID != 1 || replies[0].Text != "First words here," ||
		replies[1].Interrupted || replies[1].Text != "First words here, more words and more." {
		t.Errorf("replies %+v", replies)
	}
	if _, revoked := clauseStory(t, sinkUps, 1); revoked != 1 {
		t.Errorf("turn 1: %d clauses revoked, want 1", revoked)
	}
	if len(pb.calls) != 2 || pb.calls[0] != 1 || pb.calls[1] != 2 {
		t.Errorf("prompt builder calls %v", pb.calls)
	}
}
