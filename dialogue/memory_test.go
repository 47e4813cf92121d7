package dialogue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedSummarizer writes summaries by rule, so tests can check their content: it keeps
// the previous summary and adds every user line that states a goal ("I want ...").
type scriptedSummarizer struct {
	mu    sync.Mutex
	calls []SummaryJob
}

func (s *scriptedSummarizer) Summarize(ctx context.Context, job SummaryJob, roles Roles) (string, error) {
	s.mu.Lock()
	s.calls = append(s.calls, job)
	s.mu.Unlock()
	summary := job.Previous
	for _, u := range job.Lines {
		if u.Speaker == User && strings.Contains(u.Text, "I want") {
			summary = strings.TrimSpace(summary + " " + roles.User + " said: " + u.Text)
		}
	}
	if summary == "" {
		summary = "Small talk."
	}
	return summary, nil
}

func (s *scriptedSummarizer) jobs() []SummaryJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SummaryJob(nil), s.calls...)
}

// gatedSummarizer blocks every summary until the test releases it.
type gatedSummarizer struct {
	started chan SummaryJob
	release chan struct{}
}

func (g *gatedSummarizer) Summarize(ctx context.Context, job SummaryJob, roles Roles) (string, error) {
	g.started <- job
	select {
	case <-g.release:
		return fmt.Sprintf("summary of %d..%d", job.From, job.Through), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func TestWindowMemoryView(t *testing.T) {
	u := func(turn int) Utterance { return Utterance{Speaker: User, TurnID: turn} }
	a := func(turn int) Utterance { return Utterance{Speaker: Agent, TurnID: turn} }
	tests := []struct {
		name string
		k    int
		utts []Utterance
		want []int
	}{
		{"question in progress stays and does not count", 1, []Utterance{u(1), a(1), u(2), a(2), u(3)}, []int{2, 3, 4}},
		{"two exchanges", 2, []Utterance{u(1), a(1), u(2), a(2), u(3)}, []int{0, 1, 2, 3, 4}},
		{"no exchange in progress", 1, []Utterance{u(1), a(1), u(2), a(2)}, []int{2, 3}},
		{"greeting is an exchange", 1, []Utterance{a(0), u(1)}, []int{0, 1}},
		{"greeting forgotten", 1, []Utterance{a(0), u(1), a(1), u(2)}, []int{1, 2, 3}},
		{"several agent utterances in one exchange", 1, []Utterance{u(1), a(1), a(1), u(2), a(2), a(2)}, []int{3, 4, 5}},
		{"two user utterances in a row", 1, []Utterance{u(1), a(1), u(2), u(3)}, []int{2, 3}},
		{"empty", 3, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := WindowMemory(tc.k)
			if err != nil {
				t.Fatal(err)
			}
			var cands []int
			for i := range tc.utts {
				cands = append(cands, i)
			}
			if got := m.View(tc.utts, cands).Keep; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("keep %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := WindowMemory(0); !errors.Is(err, ErrInvalidMemory) {
		t.Errorf("window 0: %v", err)
	}
}

// goalConversation: the user states a goal, then talks about other things.
func goalConversation(n int) []Utterance {
	out := []Utterance{
		{Speaker: User, Text: "I want to learn fractions before my exam on Friday.", TurnID: 1},
		{Speaker: Agent, Text: "Great, we will practise fractions.", TurnID: 1},
	}
	for i := 2; i <= n; i++ {
		out = append(out,
			Utterance{Speaker: User, Text: fmt.Sprintf("Tell me something else, number %d.", i), TurnID: i},
			Utterance{Speaker: Agent, Text: fmt.Sprintf("Here is thing %d.", i), TurnID: i})
	}
	return out
}

func newTestStore(t *testing.T, h *History, mem Memory, cfg StoreConfig) *Store {
	t.Helper()
	s, err := NewStore(context.Background(), h, mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestWindowForgetsSummaryKeepsGoal(t *testing.T) {
	ctx := context.Background()
	window, err := WindowMemory(2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		mem      Memory
		keepGoal bool
	}{
		{"window", window, false},
		{"buffer", BufferMemory(), true},
		{"summary", SummaryMemory(), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum := &scriptedSummarizer{}
			s := newTestStore(t, NewHistory(mustFormat(t, "plain"), "You are a tutor."), tc.mem, StoreConfig{Summarizer: sum})
			for _, u := range goalConversation(8) {
				if err := s.AppendUtterance(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "What should we do now?", TurnID: 9}); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitSummaries(ctx); err != nil {
				t.Fatal(err)
			}
			prompt, stop, err := s.BuildPrompt(ctx, 9)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(stop, []string{"User:", "Assistant:"}) {
				t.Errorf("stop %q", stop)
			}
			if got := strings.Contains(prompt, "fractions before my exam"); got != tc.keepGoal {
				t.Errorf("goal in prompt: %v, want %v\n%s", got, tc.keepGoal, prompt)
			}
			if !strings.HasSuffix(prompt, "User: What should we do now?\nAssistant:") || !strings.HasPrefix(prompt, "You are a tutor.") {
				t.Errorf("prompt lost its frame:\n%s", prompt)
			}
			if tc.name == "window" && (strings.Contains(prompt, "number 6.") || !strings.Contains(prompt, "number 7.")) {
				t.Errorf("window of 2 shows the wrong exchanges:\n%s", prompt)
			}
			if tc.name == "summary" {
				if !strings.Contains(prompt, DefaultSummaryLabel+"\nUser said: I want to learn fractions") {
					t.Errorf("summary missing:\n%s", prompt)
				}
				if strings.Contains(prompt, "User: I want") || strings.Contains(prompt, "thing 7") {
					t.Errorf("summarised turns still verbatim:\n%s", prompt)
				}
				st, _ := s.MemoryState(ctx)
				if st.Covered != 16 {
					t.Errorf("summary covers %d utterances, want 16", st.Covered)
				}
			}
		})
	}
}

// A prompt request never waits for a summary in progress: it gets the last finished
// summary and the turns not yet summarised.
func TestSummaryNeverDelaysThePrompt(t *testing.T) {
	ctx := context.Background()
	g := &gatedSummarizer{started: make(chan SummaryJob, 1), release: make(chan struct{})}
	s := newTestStore(t, NewHistory(mustFormat(t, "plain"), "S"), SummaryMemory(), StoreConfig{Summarizer: g})
	for _, u := range conversation(2) {
		if err := s.AppendUtterance(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	job := <-g.started // u1 a1 are summarised once u2 arrived
	if job.From != 0 || job.Through != 2 {
		t.Fatalf("job %d..%d", job.From, job.Through)
	}
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "u3", TurnID: 3}); err != nil {
		t.Fatal(err)
	}
	// The summariser is blocked: the prompt must still come, with everything verbatim.
	promptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	prompt, _, err := s.BuildPrompt(promptCtx, 3)
	if err != nil {
		t.Fatalf("prompt while summarising: %v", err)
	}
	if want := "S\n\nUser: u1\nAssistant: a1\nUser: u2\nAssistant: a2\nUser: u3\nAssistant:"; prompt != want {
		t.Fatalf("prompt %q\nwant   %q", prompt, want)
	}
	g.release <- struct{}{}
	job = <-g.started // the next job starts as soon as the first is applied
	if job.From != 2 || job.Through != 4 || job.Previous != "summary of 0..2" {
		t.Fatalf("second job %+v", job)
	}
	prompt, _, err = s.BuildPrompt(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := "S\n\n" + DefaultSummaryLabel + "\nsummary of 0..2\n\nUser: u2\nAssistant: a2\nUser: u3\nAssistant:"; prompt != want {
		t.Fatalf("prompt %q\nwant   %q", prompt, want)
	}
	g.release <- struct{}{}
	if err := s.WaitSummaries(ctx); err != nil {
		t.Fatal(err)
	}
	// Close cancels a summary in progress without hanging.
	if err := s.AppendUtterance(ctx, Utterance{Speaker: Agent, Text: "a3", TurnID: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "u4", TurnID: 4}); err != nil {
		t.Fatal(err)
	}
	<-g.started
	s.Close()
}

type failingSummarizer struct {
	mu    sync.Mutex
	fails int
	calls int
}

func (f *failingSummarizer) Summarize(ctx context.Context, job SummaryJob, roles Roles) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fails {
		return "", errors.New("model busy")
	}
	return "ok", nil
}

func TestSummaryRetriesAfterFailure(t *testing.T) {
	ctx := context.Background()
	f := &failingSummarizer{fails: 1}
	s := newTestStore(t, NewHistory(mustFormat(t, "plain"), ""), SummaryMemory(), StoreConfig{Summarizer: f})
	for _, u := range conversation(2) {
		if err := s.AppendUtterance(ctx, u); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitSummaries(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// u2 triggered a failing job; a2 (a change) triggers the retry.
	st, err := s.MemoryState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary != "ok" || st.Covered != 2 {
		t.Fatalf("state after retry %+v", st)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls != 2 {
		t.Errorf("%d summariser calls, want 2", f.calls)
	}
}

func TestSummaryBufferMemory(t *testing.T) {
	ctx := context.Background()
	sum := &scriptedSummarizer{}
	// Each "User: uN" line is 2 words, plus 1 for BOS: a limit of 7 tokens keeps three
	// lines verbatim, cut between exchanges.
	mem, err := SummaryBufferMemory(wordTokenizer{}, 7)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestStore(t, NewHistory(mustFormat(t, "plain"), "S"), mem, StoreConfig{Summarizer: sum})
	for _, u := range conversation(4) {
		if err := s.AppendUtterance(ctx, u); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitSummaries(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendUtterance(ctx, Utterance{Speaker: User, Text: "u5", TurnID: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSummaries(ctx); err != nil {
		t.Fatal(err)
	}
	prompt, _, err := s.BuildPrompt(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := "S\n\n" + DefaultSummaryLabel + "\nSmall talk.\n\nUser: u4\nAssistant: a4\nUser: u5\nAssistant:"
	if prompt != want {
		t.Errorf("prompt %q\nwant   %q", prompt, want)
	}
	for _, job := range sum.jobs() {
		// Never summarise the exchange in progress.
		for _, u := range job.Lines {
			if u.Text == "u5" {
				t.Errorf("job %d..%d summarised the question in progress", job.From, job.Through)
			}
		}
	}
	if _, err := SummaryBufferMemory(nil, 5); !errors.Is(err, ErrInvalidMemory) {
		t.Errorf("no tokenizer: %v", err)
	}
}

func TestMemoryStateRoundTrip(t *testing.T) {
	window, _ := WindowMemory(3)
	sb, _ := SummaryBufferMemory(wordTokenizer{}, 100)
	sb.Apply(SummaryJob{From: 0, Through: 4}, "  notes  ")
	sm := SummaryMemory()
	sm.Apply(SummaryJob{From: 0, Through: 2}, "notes")
	sm.Apply(SummaryJob{From: 0, Through: 9}, "stale") // planned before the state moved on
	for _, m := range []Memory{BufferMemory(), window, sb, sm} {
		st := m.State()
		back, err := NewMemory(st, wordTokenizer{})
		if err != nil {
			t.Fatalf("%+v: %v", st, err)
		}
		if !reflect.DeepEqual(back.State(), st) {
			t.Errorf("round trip %+v -> %+v", st, back.State())
		}
	}
	if st := sm.State(); st.Summary != "notes" || st.Covered != 2 {
		t.Errorf("stale job applied: %+v", st)
	}
	for _, bad := range []MemoryState{
		{Strategy: "forgetful"},
		{Strategy: StrategyWindow},
		{Strategy: StrategyBuffer, Covered: 3},
		{Strategy: StrategySummary, Covered: -1},
		{Strategy: StrategySummaryBuffer},
	} {
		if _, err := NewMemory(bad, wordTokenizer{}); !errors.Is(err, ErrInvalidMemory) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestSummaryInsertedUtterance(t *testing.T) {
	m := SummaryMemory()
	m.Apply(SummaryJob{From: 0, Through: 4}, "s")
	m.Inserted(2)
	if got := m.State().Covered; got != 5 {
		t.Errorf("covered %d after an insertion inside the summary", got)
	}
	m.Inserted(7)
	if got := m.State().Covered; got != 5 {
		t.Errorf("covered %d after an insertion after the summary", got)
	}
}

// LLMSummarizer lays out its request in a chat format and passes the result through.
type recordingCompleter struct {
	prompt string
	stop   []string
	reply  string
}

func (r *recordingCompleter) Complete(ctx context.Context, prompt string, maxTokens int, stop []string) (string, error) {
	r.prompt, r.stop = prompt, stop
	return r.reply, nil
}

func TestLLMSummarizerPrompt(t *testing.T) {
	chatml := mustFormat(t, "chatml")
	c := &recordingCompleter{reply: "  The child wants fractions.\n"}
	s := LLMSummarizer{Completer: c, Format: &chatml}
	job := SummaryJob{Previous: "", Lines: goalConversation(1)}
	got, err := s.Summarize(context.Background(), job, Roles{User: "Child", Agent: "Teacher"})
	if err != nil {
		t.Fatal(err)
	}
	if got != "The child wants fractions." {
		t.Errorf("summary %q", got)
	}
	for _, want := range []string{
		"<|im_start|>system\nYou keep notes on a spoken conversation between Child and Teacher.",
		"Notes so far:\n(none yet)\n\nNew lines:\nChild: I want to learn fractions before my exam on Friday.\nTeacher: Great, we will practise fractions.\n",
		"<|im_start|>assistant\n",
	} {
		if !strings.Contains(c.prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, c.prompt)
		}
	}
	if !reflect.DeepEqual(c.stop, chatml.StopPatterns()) {
		t.Errorf("stop %q", c.stop)
	}
	c.reply = " \n"
	if _, err := s.Summarize(context.Background(), job, Roles{User: "A", Agent: "B"}); err == nil {
		t.Error("empty summary accepted")
	}
}
