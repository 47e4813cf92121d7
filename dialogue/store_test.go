package dialogue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// The LLM module depends on this method set; keep it exact.
var _ interface {
	BuildPrompt(ctx context.Context, turnID int) (prompt string, stop []string, err error)
} = (*Store)(nil)

func TestStoreConcurrentUse(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, NewHistory(mustFormat(t, "chatml"), "S"), nil, StoreConfig{Tokenizer: wordTokenizer{}, ContextSize: 400, ReplyReserve: 100})
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				speaker := User
				if i%2 == 1 {
					speaker = Agent
				}
				if err := s.AppendUtterance(ctx, Utterance{Speaker: speaker, Text: "word word word", TurnID: i*writers + w}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				fp, err := s.Prompt(ctx, 1<<30)
				if err != nil {
					t.Error(err)
					return
				}
				if fp.Tokens > 300 {
					t.Errorf("%d tokens over the budget", fp.Tokens)
				}
				if _, err := s.Snapshot(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	h, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	utts := h.Utterances()
	if len(utts) != writers*each {
		t.Fatalf("%d utterances", len(utts))
	}
	for i := 1; i < len(utts); i++ {
		if utts[i].TurnID < utts[i-1].TurnID {
			t.Fatalf("turn ids decrease at %d", i)
		}
	}
}

func TestStoreOperations(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, NewHistory(mustFormat(t, "llama2"), "S", WithInterruptedMark("...")), nil, StoreConfig{
		Input: InputChain{CollapseSpaces(), ReplaceText("maths", "mathematics")},
	})
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "  I love   maths ", TurnID: 1}); err != nil {
		t.Fatal(err)
	}
	clauses := []string{"So do I!", "Let us count to 3.5 together."}
	if err := s.AppendUtterance(ctx, Utterance{Speaker: Agent, Text: JoinClauses(clauses), TurnID: 1}); err != nil {
		t.Fatal(err)
	}
	ws := strings.Index(clauses[1], "count")
	u, err := s.CutInterrupted(ctx, Heard{Position: Position{TurnID: 1, ClauseID: 1, WordStart: ws, WordEnd: ws + 5, WordFraction: 0.8}, Clauses: clauses})
	if err != nil {
		t.Fatal(err)
	}
	if u.Text != "So do I! Let us count" || !u.Interrupted {
		t.Errorf("cut %+v", u)
	}
	if _, err := s.CutInterrupted(ctx, Heard{Position: Position{TurnID: 1}, Clauses: []string{"other"}}); !errors.Is(err, ErrClauseMismatch) {
		t.Errorf("mismatch: %v", err)
	}
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "wait", TurnID: 2}); err != nil {
		t.Fatal(err)
	}
	prev, err := s.SetSystemPrompt(ctx, "T")
	if err != nil || prev != "S" {
		t.Errorf("set: %q %v", prev, err)
	}
	prompt, stop, err := s.BuildPrompt(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "[INST] <<SYS>>\nT\n<</SYS>>\n\nChild : I love mathematics\n\nTeacher : So do I! Let us count...\n\nChild : wait\n\n[/INST]\nTeacher :"
	if prompt != want {
		t.Errorf("prompt %q\nwant   %q", prompt, want)
	}
	if strings.Join(stop, "|") != "Child :|Teacher :|[INST]" {
		t.Errorf("stop %q", stop)
	}
	prev, err = s.ResetSystemPrompt(ctx)
	if err != nil || prev != "T" {
		t.Errorf("reset: %q %v", prev, err)
	}
	if err := s.AppendUtterance(ctx, Utterance{Speaker: 0}); !errors.Is(err, ErrInvalidUtterance) {
		t.Errorf("invalid utterance: %v", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.BuildPrompt(cancelled, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	s.Close()
	s.Close() // idempotent
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "x", TurnID: 3}); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("after close: %v", err)
	}
	if _, _, err := s.BuildPrompt(ctx, 3); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("after close: %v", err)
	}
}

func TestStoreContextTooSmall(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, NewHistory(mustFormat(t, "plain"), strings.Repeat("long ", 50)), nil,
		StoreConfig{Tokenizer: wordTokenizer{}, ContextSize: 40, ReplyReserve: 10})
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "hi", TurnID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.BuildPrompt(ctx, 1); !errors.Is(err, ErrContextTooSmall) {
		t.Errorf("error %v", err)
	}
}

func TestNewStoreChecks(t *testing.T) {
	ctx := context.Background()
	h := NewHistory(mustFormat(t, "plain"), "")
	tests := []struct {
		name string
		mem  Memory
		cfg  StoreConfig
	}{
		{"fitting without tokenizer", nil, StoreConfig{ContextSize: 100}},
		{"reserve larger than context", nil, StoreConfig{Tokenizer: wordTokenizer{}, ContextSize: 100, ReplyReserve: 100}},
		{"negative context", nil, StoreConfig{ContextSize: -1}},
		{"summary memory without summarizer", SummaryMemory(), StoreConfig{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := NewStore(ctx, h, tc.mem, tc.cfg); err == nil {
				s.Close()
				t.Fatal("accepted")
			}
		})
	}
	if _, err := NewStore(ctx, nil, nil, StoreConfig{}); err == nil {
		t.Error("nil history accepted")
	}
}

func TestStoreStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := NewStore(ctx, NewHistory(mustFormat(t, "plain"), ""), nil, StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	<-s.done
	if _, err := s.Snapshot(context.Background()); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("after cancel: %v", err)
	}
}

// With FitSlack the prompt's first utterance stays put for several turns once the
// context is full, instead of moving every turn; every prompt still fits.
func TestStoreFitSlackKeepsThePromptStart(t *testing.T) {
	ctx := context.Background()
	const contextSize = 40 // tokens; an exchange takes 4 (wordTokenizer)
	starts := func(slack int) (changes int) {
		s := newTestStore(t, NewHistory(mustFormat(t, "plain"), "S"), nil,
			StoreConfig{Tokenizer: wordTokenizer{}, ContextSize: contextSize, FitSlack: slack})
		prev := ""
		for i, u := range conversation(30) {
			if err := s.AppendUtterance(ctx, u); err != nil {
				t.Fatal(err)
			}
			if i%2 == 1 {
				continue
			}
			fp, err := s.Prompt(ctx, u.TurnID)
			if err != nil {
				t.Fatal(err)
			}
			if fp.Tokens > contextSize {
				t.Fatalf("slack %d, turn %d: %d tokens", slack, u.TurnID, fp.Tokens)
			}
			if !strings.HasSuffix(fp.Text, "User: "+u.Text+"\nAssistant:") {
				t.Fatalf("question missing: %q", fp.Text)
			}
			first := strings.SplitN(strings.TrimPrefix(fp.Text, "S\n\n"), "\n", 2)[0]
			if first != prev {
				changes++
			}
			prev = first
		}
		return changes
	}
	tight, slack := starts(0), starts(16)
	t.Logf("prompt start changes: %d without slack, %d with slack", tight, slack)
	if tight < 20 || slack > tight/3 {
		t.Errorf("the prompt start changed %d times without slack and %d times with it", tight, slack)
	}
}

// TestDraftPromptIsAPrefixOfThePrompt: for every shipped format and memory, the draft of
// a turn in progress is the prompt the turn gets once the user's words are stored, split
// after the user's text, so that feeding the prefix ahead is exact.
func TestDraftPromptIsAPrefixOfThePrompt(t *testing.T) {
	ctx := context.Background()
	for _, name := range BuiltinFormats() {
		for _, mem := range []string{"buffer", "window"} {
			t.Run(name+"/"+mem, func(t *testing.T) {
				var m Memory = BufferMemory()
				if mem == "window" {
					var err error
					if m, err = WindowMemory(1); err != nil {
						t.Fatal(err)
					}
				}
				s := newTestStore(t, NewHistory(mustFormat(t, name), "Be brief."), m, StoreConfig{
					Tokenizer: wordTokenizer{}, ContextSize: 60, ReplyReserve: 10,
					Input: InputChain{CollapseSpaces()},
				})
				turn := 1
				for _, exchange := range [][2]string{{"hello there", "Hi! How can I help?"}, {"what time is it", "It is noon."}, {"and the date", "The first of May."}} {
					user := "  " + exchange[0] + "  now " // the Input transform applies to drafts too
					prefix, closing, _, err := s.DraftPrompt(ctx, turn+1, user)
					if err != nil {
						t.Fatal(err)
					}
					if err := s.AppendUtterance(ctx, Utterance{Speaker: User, TurnID: turn, Text: user}); err != nil {
						t.Fatal(err)
					}
					fp, err := s.Prompt(ctx, turn+1)
					if err != nil {
						t.Fatal(err)
					}
					if prefix+closing != fp.Text {
						t.Fatalf("draft %q + %q\nprompt %q", prefix, closing, fp.Text)
					}
					if !strings.HasSuffix(prefix, exchange[0]+" now") {
						t.Fatalf("prefix %q does not end with the user's text", prefix)
					}
					if err := s.AppendUtterance(ctx, Utterance{Speaker: Agent, TurnID: turn + 1, Text: exchange[1]}); err != nil {
						t.Fatal(err)
					}
					turn += 2
				}
				h, _ := s.Snapshot(ctx)
				if h.Len() != 6 {
					t.Fatalf("drafts stored something: %d utterances", h.Len())
				}
			})
		}
	}
	s := newTestStore(t, NewHistory(mustFormat(t, "chatml"), ""), nil, StoreConfig{})
	if _, _, _, err := s.DraftPrompt(ctx, 2, "   "); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("draft of no words: %v", err)
	}
}

// TestUnansweredUserLineGoesWithTheNext: a user line the agent never answered (its
// reply failed before any text) is joined with the user's next line in the next
// prompt, for every shipped format: the prompt has one user turn where two were
// stored, and the draft of the next line is still a prefix of that prompt.
func TestUnansweredUserLineGoesWithTheNext(t *testing.T) {
	ctx := context.Background()
	for _, name := range BuiltinFormats() {
		t.Run(name, func(t *testing.T) {
			f := mustFormat(t, name)
			s := newTestStore(t, NewHistory(f, "Be brief."), BufferMemory(), StoreConfig{Tokenizer: wordTokenizer{}, ContextSize: 200, ReplyReserve: 10})
			for _, u := range []Utterance{
				{Speaker: User, TurnID: 1, Text: "hello"},
				{Speaker: Agent, TurnID: 2, Text: "Hi."},
				{Speaker: User, TurnID: 3, Text: "what is two and two"},
				// The reply to turn 3 failed before any text: no agent utterance 4.
			} {
				if err := s.AppendUtterance(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			prefix, closing, _, err := s.DraftPrompt(ctx, 6, "are you there")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.AppendUtterance(ctx, Utterance{Speaker: User, TurnID: 5, Text: "are you there"}); err != nil {
				t.Fatal(err)
			}
			fp, err := s.Prompt(ctx, 6)
			if err != nil {
				t.Fatal(err)
			}
			if prefix+closing != fp.Text {
				t.Errorf("draft %q + %q\nprompt %q", prefix, closing, fp.Text)
			}
			if !strings.Contains(fp.Text, "what is two and two are you there") {
				t.Errorf("the two lines are not one turn:\n%s", fp.Text)
			}
			opening := f.User.opening()
			if n := strings.Count(fp.Text, opening); n != 2 {
				t.Errorf("%d user turns (%q) in:\n%s", n, opening, fp.Text)
			}
		})
	}
}
