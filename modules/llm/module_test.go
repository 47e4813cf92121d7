package llm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// script is an engine that emits fixed pieces, for checking the module's IU sequences
// exactly. The real engines are tested above.
type script struct {
	pieces []string
	err    error
	// length ends the generation as the token limit does.
	length bool
	// hang makes the generation of this prompt stop after its first piece until it is
	// cancelled.
	hang string
}

func (s *script) Generate(ctx context.Context, req llm.Request, emit func(string) error) (llm.Result, error) {
	var sb strings.Builder
	for i, p := range s.pieces {
		if i == 1 && req.Prompt == s.hang {
			<-ctx.Done()
			return llm.Result{Text: sb.String(), StopReason: llm.StopCancelled}, ctx.Err()
		}
		if err := emit(p); err != nil {
			return llm.Result{Text: sb.String(), StopReason: llm.StopCancelled}, err
		}
		sb.WriteString(p)
	}
	if s.err != nil {
		return llm.Result{Text: sb.String(), StopReason: llm.StopError, Tokens: len(s.pieces)}, s.err
	}
	if s.length {
		return llm.Result{Text: sb.String(), StopReason: llm.StopLength, Tokens: len(s.pieces)}, nil
	}
	return llm.Result{Text: sb.String(), StopReason: llm.StopEOG, Tokens: len(s.pieces)}, nil
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
		case llm.Clause:
			last := ""
			if p.Last {
				last = " last"
			}
			out = append(out, fmt.Sprintf("%s %d %q%s", up.Type, p.ClauseID, p.Text, last))
		case llm.Reply:
			out = append(out, fmt.Sprintf("%s reply %q", up.Type, p.Text))
		}
	}
	return out
}

func TestModuleUpdateSequence(t *testing.T) {
	tests := []struct {
		name   string
		engine *script
		cfg    llm.Config
		want   []string
		err    string
	}{
		{"two sentences", &script{pieces: []string{"Hello", " there", ",", " my friend", ".", " How", " are you?"}}, llm.Config{}, []string{
			`add 0 "Hello"`, `update 0 "Hello there"`, `update 0 "Hello there,"`,
			`commit 0 "Hello there,"`, `add 1 "my friend"`,
			`update 1 "my friend."`,
			`commit 1 "my friend."`, `add 2 "How"`,
			`update 2 "How are you?"`,
			`update 2 "How are you?" last`, `commit 2 "How are you?" last`,
			`add reply "Hello there, my friend. How are you?"`, `commit reply "Hello there, my friend. How are you?"`,
		}, ""},
		{"ends on a complete clause", &script{pieces: []string{"One two.", " Three four."}}, llm.Config{}, []string{
			`add 0 "One two."`,
			`commit 0 "One two."`, `add 1 "Three four."`,
			`update 1 "Three four." last`, `commit 1 "Three four." last`,
			`add reply "One two. Three four."`, `commit reply "One two. Three four."`,
		}, ""},
		{"filter", &script{pieces: []string{"*waves* hi", " you"}}, llm.Config{NewFilter: func() llm.StreamFilter { return &upper{} }}, []string{
			`add 0 "WAVES HI"`, `update 0 "WAVES HI YOU"`,
			`update 0 "WAVES HI YOU END." last`, `commit 0 "WAVES HI YOU END." last`,
			`add reply "*waves* hi you"`, `commit reply "*waves* hi you"`,
		}, ""},
		{"engine fails", &script{pieces: []string{"All good.", " Then it bro"}, err: errors.New("connection reset")}, llm.Config{}, []string{
			`add 0 "All good."`,
			`commit 0 "All good."`, `add 1 "Then it bro"`,
			`revoke 1 "Then it bro"`, `add reply "All good. Then it bro"`, `commit reply "All good. Then it bro"`,
		}, "connection reset"},
		{"engine fails after a complete clause", &script{pieces: []string{"All good. Fine", " here."}, err: errors.New("boom")}, llm.Config{}, []string{
			`add 0 "All good."`, `commit 0 "All good."`, `add 1 "Fine"`,
			`update 1 "Fine here."`,
			`update 1 "Fine here." last`, `commit 1 "Fine here." last`,
			`add reply "All good. Fine here."`, `commit reply "All good. Fine here."`,
		}, "boom"},
		{"token limit after a sentence", &script{pieces: []string{"All good.", " Then it bro"}, length: true}, llm.Config{}, []string{
			`add 0 "All good."`,
			`commit 0 "All good."`, `add 1 "Then it bro"`,
			`revoke 1 "Then it bro"`, `add reply "All good. Then it bro"`, `commit reply "All good. Then it bro"`,
		}, ""},
		{"token limit mid-sentence after a short first clause", &script{pieces: []string{"Anna,", " you can", " go to", " the sto"}, length: true},
			llm.Config{Clauses: llm.ClauseConfig{FirstMaxWords: 3}}, []string{
				`add 0 "Anna,"`, `update 0 "Anna, you can"`,
				`commit 0 "Anna, you can"`, `add 1 "go to"`, `update 1 "go to the sto"`,
				`update 1 "go to the"`, `update 1 "go to the" last`, `commit 1 "go to the" last`,
				`add reply "Anna, you can go to the sto"`, `commit reply "Anna, you can go to the sto"`,
			}, ""},
		{"nothing generated", &script{}, llm.Config{}, []string{`add reply ""`, `commit reply ""`}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pb := llmtest.NewPrompts(map[int]string{7: "p"})
			mod := llm.NewModule("llm", tc.engine, pb, tc.cfg)
			c := llmtest.RunNetwork(t, clock.NewVirtual(time.Unix(0, 0)), mod, func(ctx context.Context, c *llmtest.Controller) error {
				if err := c.Send(ctx, control.Respond, 7); err != nil {
					return err
				}
				return c.Until(ctx, llmtest.ReplyOf(7))
			})
			got := describe(c.Ups)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("updates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if r := c.Replies[0]; !strings.Contains(r.Err, tc.err) || (tc.err == "") != (r.Err == "") {
				t.Errorf("reply error %q, want %q", r.Err, tc.err)
			}
		})
	}
}

func TestModulePromptError(t *testing.T) {
	pb := llmtest.FailingPrompts(errors.New("history unavailable"))
	mod := llm.NewModule("llm", &script{pieces: []string{"never"}}, pb, llm.Config{})
	c := llmtest.RunNetwork(t, nil, mod, func(ctx context.Context, c *llmtest.Controller) error {
		if err := c.Send(ctx, control.Respond, 1); err != nil {
			return err
		}
		return c.Until(ctx, llmtest.ReplyOf(1))
	})
	if r := c.Replies[0]; !strings.Contains(r.Err, "history unavailable") || r.Text != "" {
		t.Errorf("reply %+v", r)
	}
}

// TestModuleSupersedeAndInputEnd: a Respond for a new turn interrupts the turn in
// progress; when the input ends, the module finishes the turn in progress first.
func TestModuleSupersedeAndInputEnd(t *testing.T) {
	eng := &script{pieces: []string{"First words here,", " more words", " and more."}, hang: "a"}
	pb := llmtest.NewPrompts(map[int]string{1: "a", 2: "b"})
	mod := llm.NewModule("llm", eng, pb, llm.Config{})
	c := &llmtest.Controller{}
	ctrl := iu.ModuleFunc{ModuleName: "manager", Fn: func(ctx context.Context, p *iu.Ports) error {
		c.Ports = p
		if err := c.Send(ctx, control.Respond, 1); err != nil {
			return err
		}
		if err := c.Until(ctx, func(up iu.Update) bool { return up.Type == iu.Add }); err != nil {
			return err
		}
		if err := c.Send(ctx, control.Respond, 2); err != nil {
			return err
		}
		// Leave with turn 2 in progress: the module must finish it on its own.
		return c.Until(ctx, llmtest.ReplyOf(1))
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
	var replies []llm.Reply
	for _, up := range sinkUps {
		if r, ok := up.IU.Payload.(llm.Reply); ok && up.Type == iu.Commit {
			replies = append(replies, r)
		}
	}
	if len(replies) != 2 || !replies[0].Interrupted || replies[0].TurnID != 1 || replies[0].Text != "First words here," ||
		replies[1].Interrupted || replies[1].Text != "First words here, more words and more." {
		t.Errorf("replies %+v", replies)
	}
	if _, revoked := llmtest.ClauseStory(t, sinkUps, 1); revoked != 1 {
		t.Errorf("turn 1: %d clauses revoked, want 1", revoked)
	}
	if calls := pb.Calls(); len(calls) != 2 || calls[0] != 1 || calls[1] != 2 {
		t.Errorf("prompt builder calls %v", calls)
	}
}
