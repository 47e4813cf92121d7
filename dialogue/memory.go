package dialogue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Memory decides what of the stored history a reply prompt shows: a summary of older
// utterances (written by the LLM in the background) and the utterances shown verbatim.
//
// A Memory is plain state owned by one goroutine (the Store's); it never calls the LLM
// itself. The owner asks Plan for summarising work, runs the Summarizer on a goroutine of
// its own, and hands the result to Apply when it arrives. View never waits: it uses the
// latest finished summary plus the utterances that summary does not cover.
type Memory interface {
	// View chooses what the prompt shows among the candidate utterances (indices into
	// utts, oldest first).
	View(utts []Utterance, candidates []int) MemoryView
	// Plan returns the summarising job that is due now, if any. The owner calls it after
	// the history changed and after a job finished, never while a job runs.
	Plan(utts []Utterance) (job SummaryJob, due bool, err error)
	// Apply records the summary a job produced.
	Apply(job SummaryJob, summary string)
	// Inserted tells the memory that an utterance was inserted at index i, before the end.
	Inserted(i int)
	// State returns the memory's state for saving; NewMemory restores it.
	State() MemoryState
}

// MemoryView is what a memory puts into a prompt.
type MemoryView struct {
	// Summary of the utterances that are not shown verbatim ("" for none).
	Summary string
	// Keep lists the indices of the utterances shown verbatim, oldest first.
	Keep []int
}

// SummaryJob asks for the utterances From..Through-1 to be summarised onto Previous.
type SummaryJob struct {
	Previous      string
	Lines         []Utterance
	From, Through int
}

// Summarizer writes a new summary: Previous extended with Lines. Store runs it on its
// own goroutine; it must return when ctx is cancelled.
type Summarizer interface {
	Summarize(ctx context.Context, job SummaryJob, roles Roles) (string, error)
}

// Roles names the speakers for summaries and transcripts.
type Roles struct{ User, Agent string }

// Name returns the name of speaker s.
func (r Roles) Name(s Speaker) string {
	if s == Agent {
		return r.Agent
	}
	return r.User
}

// RolesOf returns a format's role names, with "User" and "Assistant" for formats whose
// roles have no names (Mistral, Llama-2-chat).
func RolesOf(f Format) Roles {
	r := Roles{User: f.User.Role, Agent: f.Agent.Role}
	if r.User == "" {
		r.User = "User"
	}
	if r.Agent == "" {
		r.Agent = "Assistant"
	}
	return r
}

// Memory strategies, as saved in MemoryState.Strategy.
const (
	StrategyBuffer        = "buffer"
	StrategyWindow        = "window"
	StrategySummary       = "summary"
	StrategySummaryBuffer = "summary-buffer"
)

// MemoryState is a memory's saved state.
type MemoryState struct {
	Strategy string `json:"strategy"`
	// Window is the number of exchanges a window memory keeps.
	Window int `json:"window,omitempty"`
	// MaxTokens is the verbatim token limit of a summary-buffer memory.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Summary covers the first Covered utterances of the history.
	Summary string `json:"summary,omitempty"`
	Covered int    `json:"covered,omitempty"`
}

// ErrInvalidMemory is wrapped by errors about memory configuration or saved state.
var ErrInvalidMemory = errors.New("invalid memory")

// NewMemory builds a memory from its state. tok is needed by the summary-buffer strategy.
func NewMemory(st MemoryState, tok Tokenizer) (Memory, error) {
	if st.Covered < 0 || (st.Covered > 0 && st.Strategy != StrategySummary && st.Strategy != StrategySummaryBuffer) {
		return nil, fmt.Errorf("dialogue: %w: covered %d with strategy %q", ErrInvalidMemory, st.Covered, st.Strategy)
	}
	switch st.Strategy {
	case StrategyBuffer, "":
		return BufferMemory(), nil
	case StrategyWindow:
		return WindowMemory(st.Window)
	case StrategySummary:
		m := SummaryMemory().(*summaryMemory)
		m.summary, m.covered = st.Summary, st.Covered
		return m, nil
	case StrategySummaryBuffer:
		mem, err := SummaryBufferMemory(tok, st.MaxTokens)
		if err != nil {
			return nil, err
		}
		m := mem.(*summaryMemory)
		m.summary, m.covered = st.Summary, st.Covered
		return m, nil
	}
	return nil, fmt.Errorf("dialogue: %w: unknown strategy %q", ErrInvalidMemory, st.Strategy)
}

// BufferMemory shows every utterance (context fitting still drops the oldest).
func BufferMemory() Memory { return bufferMemory{} }

type bufferMemory struct{}

func (bufferMemory) View(_ []Utterance, candidates []int) MemoryView {
	return MemoryView{Keep: append([]int(nil), candidates...)}
}
func (bufferMemory) Plan([]Utterance) (SummaryJob, bool, error) { return SummaryJob{}, false, nil }
func (bufferMemory) Apply(SummaryJob, string)                   {}
func (bufferMemory) Inserted(int)                               {}
func (bufferMemory) State() MemoryState                         { return MemoryState{Strategy: StrategyBuffer} }

// WindowMemory shows the last k exchanges. An exchange is a user utterance with the agent
// utterances after it; agent utterances before the first user utterance form an exchange
// of their own. The exchange in progress (a user utterance with no reply yet) is always
// shown and does not count, so k = 1 shows the previous exchange and the new question.
func WindowMemory(k int) (Memory, error) {
	if k < 1 {
		return nil, fmt.Errorf("dialogue: %w: window of %d exchanges", ErrInvalidMemory, k)
	}
	return windowMemory{k: k}, nil
}

type windowMemory struct{ k int }

func (m windowMemory) View(utts []Utterance, candidates []int) MemoryView {
	var starts []int // positions in candidates where an exchange starts
	for j, i := range candidates {
		if j == 0 || startsExchange(utts[i]) {
			starts = append(starts, j)
		}
	}
	if len(starts) == 0 {
		return MemoryView{}
	}
	last := starts[len(starts)-1]
	inProgress := startsExchange(utts[candidates[last]])
	for _, i := range candidates[last:] {
		if utts[i].Speaker == Agent {
			inProgress = false
		}
	}
	keep := m.k
	if inProgress {
		keep++
	}
	first := 0
	if len(starts) > keep {
		first = starts[len(starts)-keep]
	}
	return MemoryView{Keep: append([]int(nil), candidates[first:]...)}
}
func (windowMemory) Plan([]Utterance) (SummaryJob, bool, error) { return SummaryJob{}, false, nil }
func (windowMemory) Apply(SummaryJob, string)                   {}
func (windowMemory) Inserted(int)                               {}
func (m windowMemory) State() MemoryState {
	return MemoryState{Strategy: StrategyWindow, Window: m.k}
}

// SummaryMemory keeps a running summary written by the LLM: once an exchange is over
// (the user has spoken again), its lines are summarised onto the previous summary. The
// prompt shows the summary and the utterances it does not cover yet.
func SummaryMemory() Memory { return &summaryMemory{strategy: StrategySummary} }

// SummaryBufferMemory shows recent utterances verbatim up to maxTokens tokens (counted
// with tok as "Role: text" lines) and summarises older ones onto a running summary.
func SummaryBufferMemory(tok Tokenizer, maxTokens int) (Memory, error) {
	if tok == nil {
		return nil, fmt.Errorf("dialogue: %w: summary-buffer memory needs a tokenizer", ErrInvalidMemory)
	}
	if maxTokens < 1 {
		return nil, fmt.Errorf("dialogue: %w: summary-buffer limit of %d tokens", ErrInvalidMemory, maxTokens)
	}
	return &summaryMemory{strategy: StrategySummaryBuffer, tok: tok, maxTokens: maxTokens}, nil
}

type summaryMemory struct {
	strategy  string
	tok       Tokenizer // summary-buffer only
	maxTokens int       // summary-buffer only
	summary   string
	covered   int // the summary covers utts[:covered]
}

func (m *summaryMemory) View(utts []Utterance, candidates []int) MemoryView {
	v := MemoryView{Summary: m.summary}
	for _, i := range candidates {
		if i >= m.covered {
			v.Keep = append(v.Keep, i)
		}
	}
	return v
}

// summarisable returns the end of the utterances that may be summarised: everything before
// the last user utterance. The exchange in progress stays verbatim, and so does an agent
// turn that may still be cut back by a late interruption report.
func summarisable(utts []Utterance) int {
	for i := len(utts) - 1; i >= 0; i-- {
		if startsExchange(utts[i]) {
			return i
		}
	}
	return 0
}

// startsExchange reports whether u opens an exchange: a user turn (a backchannel
// accompanies the agent's turn before it and opens nothing).
func startsExchange(u Utterance) bool { return u.Speaker == User && !u.Backchannel }

func (m *summaryMemory) Plan(utts []Utterance) (SummaryJob, bool, error) {
	limit := summarisable(utts)
	if m.covered > len(utts) {
		m.covered = len(utts)
	}
	if limit <= m.covered {
		return SummaryJob{}, false, nil
	}
	through := limit
	if m.strategy == StrategySummaryBuffer {
		var err error
		through, err = m.bufferCut(utts, limit)
		if err != nil {
			return SummaryJob{}, false, err
		}
		if through <= m.covered {
			return SummaryJob{}, false, nil
		}
	}
	job := SummaryJob{
		Previous: m.summary,
		Lines:    append([]Utterance(nil), utts[m.covered:through]...),
		From:     m.covered,
		Through:  through,
	}
	return job, true, nil
}

// bufferCut returns the smallest index k in [covered, limit) where an exchange starts
// (a user utterance) such that the verbatim utterances utts[k:] fit maxTokens, or limit
// when none does. Cutting between exchanges keeps an answer next to its question. The
// token count falls as k grows, so k is found by binary search: Plan runs on the Store's
// goroutine after every change and must stay cheap.
func (m *summaryMemory) bufferCut(utts []Utterance, limit int) (int, error) {
	roles := Roles{User: "User", Agent: "Assistant"}
	var starts []int
	for k := m.covered; k < limit; k++ {
		if startsExchange(utts[k]) {
			starts = append(starts, k)
		}
	}
	var err error
	i := sort.Search(len(starts), func(i int) bool {
		if err != nil {
			return true
		}
		var n int
		n, err = m.tok.CountTokens(TranscriptLines(utts[starts[i]:], roles))
		return n <= m.maxTokens
	})
	if err != nil {
		return 0, fmt.Errorf("dialogue: summary-buffer memory: %w", err)
	}
	if i < len(starts) {
		return starts[i], nil
	}
	return limit, nil
}

func (m *summaryMemory) Apply(job SummaryJob, summary string) {
	if job.From != m.covered || job.Through < job.From {
		return // the state moved on (restored, or reset) since the job was planned
	}
	m.summary = strings.TrimSpace(summary)
	m.covered = job.Through
}

func (m *summaryMemory) Inserted(i int) {
	// An utterance inserted among summarised ones is older than the summary's end: it is
	// counted as covered rather than shown out of order.
	if i < m.covered {
		m.covered++
	}
}

func (m *summaryMemory) State() MemoryState {
	return MemoryState{Strategy: m.strategy, MaxTokens: m.maxTokens, Summary: m.summary, Covered: m.covered}
}

// Completer generates text from a raw prompt (modules/llm's engine, adapted).
type Completer interface {
	Complete(ctx context.Context, prompt string, maxTokens int, stop []string) (string, error)
}

// DefaultSummaryInstructions is the system prompt of LLMSummarizer.
const DefaultSummaryInstructions = "You keep notes on a spoken conversation between {user} and {agent}. " +
	"Rewrite the notes so that they also cover the new lines. Keep what {user} wants to achieve, " +
	"facts {user} gave, and questions still open. Write only the updated notes, in a few short sentences."

// LLMSummarizer writes summaries with a language model.
//
// Give it a Completer with its own inference context (for example a second
// llamacpp.Engine on the same, shared model): an engine runs one generation at a time,
// so a summary on the agent's own engine would hold up the agent's next reply.
type LLMSummarizer struct {
	Completer Completer
	// Format lays out the summarising request for the model (nil: the "plain" format).
	Format *Format
	// Instructions is the system prompt; "{user}" and "{agent}" are replaced by the role
	// names. Empty means DefaultSummaryInstructions.
	Instructions string
	// MaxTokens bounds the summary's length (0: 160).
	MaxTokens int
}

// Summarize implements Summarizer.
func (s LLMSummarizer) Summarize(ctx context.Context, job SummaryJob, roles Roles) (string, error) {
	if s.Completer == nil {
		return "", errors.New("dialogue: LLMSummarizer without a Completer")
	}
	var f Format
	if s.Format != nil {
		f = *s.Format
	} else {
		var err error
		if f, err = BuiltinFormat("plain"); err != nil {
			return "", err
		}
	}
	instr := s.Instructions
	if instr == "" {
		instr = DefaultSummaryInstructions
	}
	instr = strings.NewReplacer("{user}", roles.User, "{agent}", roles.Agent).Replace(instr)
	prev := strings.TrimSpace(job.Previous)
	if prev == "" {
		prev = "(none yet)"
	}
	request := "Notes so far:\n" + prev + "\n\nNew lines:\n" + TranscriptLines(job.Lines, roles) + "\nUpdated notes:"
	src := promptSource{format: f, system: instr, utterances: []Utterance{{Speaker: User, Text: request}}}
	maxTokens := s.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 160
	}
	out, err := s.Completer.Complete(ctx, src.render(0), maxTokens, f.StopPatterns())
	if err != nil {
		return "", fmt.Errorf("dialogue: summarising: %w", err)
	}
	out = strings.TrimSpace(out)
	if out == "" {
		return "", errors.New("dialogue: summarising: the model wrote an empty summary")
	}
	return out, nil
}
