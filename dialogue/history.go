package dialogue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Speaker says who said an utterance.
type Speaker uint8

const (
	// User is the person talking to the agent.
	User Speaker = iota + 1
	// Agent is Parley.
	Agent
)

func (s Speaker) String() string {
	switch s {
	case User:
		return "user"
	case Agent:
		return "agent"
	}
	return fmt.Sprintf("speaker(%d)", uint8(s))
}

// Valid reports whether s is User or Agent.
func (s Speaker) Valid() bool { return s == User || s == Agent }

// MarshalText writes "user" or "agent".
func (s Speaker) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("dialogue: cannot encode %v", s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads "user" or "agent".
func (s *Speaker) UnmarshalText(b []byte) error {
	switch string(b) {
	case "user":
		*s = User
	case "agent":
		*s = Agent
	default:
		return fmt.Errorf("dialogue: unknown speaker %q", b)
	}
	return nil
}

// Utterance is one stored turn of one speaker.
type Utterance struct {
	Speaker Speaker `json:"speaker"`
	// Text is what the history keeps: for an interrupted agent turn, only what the user heard.
	Text string `json:"text"`
	// TurnID is the dialogue manager's turn number. Turn ids never decrease along the
	// history; a user utterance and the agent's reply to it may share one.
	TurnID int `json:"turn_id"`
	// Interrupted marks an agent turn the user barged into.
	Interrupted bool `json:"interrupted,omitempty"`
	// Backchannel marks a user utterance that was not a turn: an acknowledgement
	// ("mm-hmm", "yeah") or hum while the agent spoke, which the agent talked on
	// through. TurnID is then the agent turn it accompanied, and it is stored after
	// that turn. Prompts leave backchannels out unless the history shows them
	// (WithBackchannels).
	Backchannel bool `json:"backchannel,omitempty"`
	// FullText is what was generated before an interruption cut Text back ("" when the
	// utterance was never cut).
	FullText string    `json:"full_text,omitempty"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
}

// Errors of History operations.
var (
	ErrInvalidUtterance = errors.New("invalid utterance")
	ErrNoSuchTurn       = errors.New("no such agent turn")
	ErrContextTooSmall  = errors.New("the system prompt and reply cue alone do not fit the context")
)

// DefaultSummaryLabel introduces a memory's summary inside the system block.
const DefaultSummaryLabel = "Summary of the conversation so far:"

// History is the dialogue history: the prompt format, the system prompt and the
// utterances. It is a plain value owned by one goroutine at a time; Store shares one
// between goroutines. Use NewHistory; Clone makes an independent copy.
type History struct {
	format          Format
	initialSystem   string
	system          string
	utterances      []Utterance
	interruptedMark string
	summaryLabel    string
	// backchannels shows backchannels in prompts.
	backchannels bool
}

// HistoryOption configures a History.
type HistoryOption func(*History)

// WithInterruptedMark makes interrupted agent turns show mark after their text in prompts
// ("..." or " (interrupted)"), so that the model knows it was cut off. The stored text
// stays as heard.
func WithInterruptedMark(mark string) HistoryOption {
	return func(h *History) { h.interruptedMark = mark }
}

// WithBackchannels makes prompts show backchannels (user utterances marked Backchannel)
// as user text (joined with the user's next line); by default they are left out, and the
// model sees only real turns.
func WithBackchannels(show bool) HistoryOption {
	return func(h *History) { h.backchannels = show }
}

// ShowsBackchannels reports whether prompts show backchannels.
func (h *History) ShowsBackchannels() bool { return h.backchannels }

// WithSummaryLabel sets the line that introduces a memory's summary in the system block.
func WithSummaryLabel(label string) HistoryOption {
	return func(h *History) { h.summaryLabel = label }
}

// NewHistory returns an empty history with the given format and initial system prompt.
func NewHistory(format Format, systemPrompt string, opts ...HistoryOption) *History {
	h := &History{format: format, initialSystem: systemPrompt, system: systemPrompt, summaryLabel: DefaultSummaryLabel}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Clone returns an independent copy of h.
func (h *History) Clone() *History {
	c := *h
	c.utterances = append([]Utterance(nil), h.utterances...)
	c.format.Stop = append([]string(nil), h.format.Stop...)
	return &c
}

// Format returns the prompt format.
func (h *History) Format() Format { return h.format }

// InterruptedMark returns the mark shown after interrupted agent turns in prompts.
func (h *History) InterruptedMark() string { return h.interruptedMark }

// Len returns the number of stored utterances.
func (h *History) Len() int { return len(h.utterances) }

// Utterances returns a copy of every stored utterance, oldest first (including those that
// context fitting leaves out of prompts).
func (h *History) Utterances() []Utterance { return append([]Utterance(nil), h.utterances...) }

// SystemPrompt returns the current system prompt.
func (h *History) SystemPrompt() string { return h.system }

// InitialSystemPrompt returns the system prompt the history was created with.
func (h *History) InitialSystemPrompt() string { return h.initialSystem }

// SetSystemPrompt replaces the system prompt and returns the previous one.
func (h *History) SetSystemPrompt(s string) (previous string) {
	previous, h.system = h.system, s
	return previous
}

// ResetSystemPrompt restores the initial system prompt and returns the previous one.
func (h *History) ResetSystemPrompt() (previous string) { return h.SetSystemPrompt(h.initialSystem) }

// StopPatterns returns the patterns that end the agent's reply (see Format.StopPatterns).
func (h *History) StopPatterns() []string { return h.format.StopPatterns() }

// Append stores an utterance and returns its index. An utterance whose TurnID is lower
// than a stored one is inserted after the last utterance with TurnID <= its own (this
// happens when the agent's interrupted reply is recorded after the user's next words);
// otherwise it goes at the end.
func (h *History) Append(u Utterance) (int, error) {
	if !u.Speaker.Valid() {
		return 0, fmt.Errorf("dialogue: %w: speaker %v", ErrInvalidUtterance, u.Speaker)
	}
	if u.TurnID < 0 {
		return 0, fmt.Errorf("dialogue: %w: negative turn id %d", ErrInvalidUtterance, u.TurnID)
	}
	i := sort.Search(len(h.utterances), func(i int) bool { return h.utterances[i].TurnID > u.TurnID })
	h.utterances = append(h.utterances, Utterance{})
	copy(h.utterances[i+1:], h.utterances[i:])
	h.utterances[i] = u
	return i, nil
}

// agentIndex returns the index of the last agent utterance of turn, or -1.
func (h *History) agentIndex(turn int) int {
	for i := len(h.utterances) - 1; i >= 0; i-- {
		if u := h.utterances[i]; u.Speaker == Agent && u.TurnID == turn {
			return i
		}
	}
	return -1
}

// AgentUtterance returns the last agent utterance of the turn.
func (h *History) AgentUtterance(turn int) (Utterance, bool) {
	if i := h.agentIndex(turn); i >= 0 {
		return h.utterances[i], true
	}
	return Utterance{}, false
}

// CutInterrupted stores only what the user heard of agent turn heard.TurnID (see Align)
// and marks it interrupted. When the turn was not stored yet, it is appended, with the
// clauses joined as its generated text. Cutting again starts from the full generated
// text, so a later, longer report replaces an earlier one. The utterance takes the times
// heard gives (those it had stay when heard gives none). It returns the stored utterance
// and its index.
func (h *History) CutInterrupted(heard Heard, opts AlignOptions) (Utterance, int, error) {
	i := h.agentIndex(heard.TurnID)
	full := JoinClauses(heard.Clauses)
	if i >= 0 {
		full = h.utterances[i].FullText
		if full == "" {
			full = h.utterances[i].Text
		}
	}
	res, err := Align(full, heard, opts)
	if err != nil {
		return Utterance{}, -1, fmt.Errorf("dialogue: turn %d: %w", heard.TurnID, err)
	}
	if i < 0 {
		u := Utterance{Speaker: Agent, TurnID: heard.TurnID, Text: res.Text, FullText: full, Interrupted: true,
			Start: heard.Start, End: heard.End}
		i, err = h.Append(u)
		if err != nil {
			return Utterance{}, -1, err
		}
		return u, i, nil
	}
	u := &h.utterances[i]
	u.FullText = full
	u.Text = res.Text
	u.Interrupted = true
	if !heard.Start.IsZero() {
		u.Start, u.End = heard.Start, heard.End
	}
	return *u, i, nil
}

// PromptOptions selects what a prompt shows.
type PromptOptions struct {
	// FromTurn and ToTurn select the utterances with FromTurn <= TurnID <= ToTurn;
	// ToTurn <= 0 means no upper bound.
	FromTurn, ToTurn int
	// ForReply builds the prompt for generating agent turn ToTurn: the agent's own
	// utterances of turn ToTurn (an earlier attempt) are left out.
	ForReply bool
	// System, when not nil, replaces the history's system prompt for this prompt only.
	System *string
	// Summary, when not empty, is shown in the system block after the system prompt,
	// introduced by the history's summary label (memories use it).
	Summary string
}

// ForTurn returns the options for generating agent turn turnID from the whole history.
func ForTurn(turnID int) PromptOptions { return PromptOptions{ToTurn: turnID, ForReply: true} }

// selected returns the indices of the utterances opts selects.
func (h *History) selected(opts PromptOptions) []int {
	var idx []int
	for i, u := range h.utterances {
		if u.TurnID < opts.FromTurn || (opts.ToTurn > 0 && u.TurnID > opts.ToTurn) {
			continue
		}
		if opts.ForReply && u.Speaker == Agent && u.TurnID == opts.ToTurn {
			continue
		}
		if u.Backchannel && !h.backchannels {
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

// promptSource is everything needed to lay out and fit one prompt, detached from the
// History so that a caller's goroutine can fit it while the owner goes on.
type promptSource struct {
	format     Format
	system     string
	utterances []Utterance
	indices    []int // the utterances' indices in the history
	mark       string
}

func (h *History) source(opts PromptOptions, keep []int) promptSource {
	system := h.system
	if opts.System != nil {
		system = *opts.System
	}
	if s := strings.TrimSpace(opts.Summary); s != "" {
		part := s
		if h.summaryLabel != "" {
			part = h.summaryLabel + "\n" + s
		}
		if strings.TrimSpace(system) != "" {
			system = strings.TrimSpace(system) + "\n\n" + part
		} else {
			system = part
		}
	}
	utts := make([]Utterance, 0, len(keep))
	for _, i := range keep {
		utts = append(utts, h.utterances[i])
	}
	return promptSource{format: h.format, system: system, utterances: utts, indices: keep, mark: h.interruptedMark}
}

// Prompt lays out the utterances opts selects, without fitting them to a context.
func (h *History) Prompt(opts PromptOptions) string {
	return h.source(opts, h.selected(opts)).render(0)
}

// Tokenizer counts the tokens of a text the way the model will see it.
// engines/llama.Model satisfies it. It must be safe for concurrent use: the Store counts
// tokens on its callers' goroutines.
type Tokenizer interface {
	CountTokens(text string) (int, error)
}

// FittedPrompt is a prompt fitted to a model's context.
type FittedPrompt struct {
	Text string
	// Stop holds the stop patterns of the format.
	Stop []string
	// Tokens is the prompt's token count as the tokenizer reports it (0 when no tokenizer
	// was used).
	Tokens int
	// Utterances is how many utterances the prompt shows; Dropped how many selected
	// ones were left out, oldest first, to fit.
	Utterances, Dropped int

	start int // position of the first shown utterance in the prompt source
}

// FitPrompt lays out the utterances opts selects and drops the oldest until the prompt
// takes at most budget tokens (the context size minus the reserve for the reply). See
// fit for the rules.
func (h *History) FitPrompt(ctx context.Context, tok Tokenizer, budget int, opts PromptOptions) (FittedPrompt, error) {
	return h.source(opts, h.selected(opts)).fit(ctx, tok, budget)
}

// turnText is the text a turn shows in a prompt.
func (s promptSource) turnText(u Utterance) string {
	text := strings.TrimSpace(u.Text)
	if u.Interrupted && u.Speaker == Agent && s.mark != "" {
		text = strings.TrimSpace(text + s.mark)
	}
	return text
}

// render lays out the prompt from the utterances from index start on. Utterances whose
// text is empty (after trimming, and with no interrupted mark) are left out: an empty turn
// only confuses the model. Consecutive user utterances are one turn, their texts joined
// by a space: a user line the agent never answered (its reply failed before any text, or
// nobody heard any of it) goes with the user's next line, as does a backchannel shown
// after the agent's turn, so that the prompt never has two user turns in a row and
// reads as the conversation went.
func (s promptSource) render(start int) string {
	f := s.format
	var b strings.Builder
	b.WriteString(f.Prompt.Pre)
	block := f.SystemBlock(s.system)

	type turn struct {
		speaker Speaker
		text    string
	}
	turns := make([]turn, 0, len(s.utterances)-start)
	for _, u := range s.utterances[start:] {
		t := s.turnText(u)
		switch {
		case t == "":
		case u.Speaker == User && len(turns) > 0 && turns[len(turns)-1].speaker == User:
			turns[len(turns)-1].text += " " + t
		default:
			turns = append(turns, turn{u.Speaker, t})
		}
	}

	host := -1 // the turn that carries the system block, for user placements
	if block != "" {
		switch f.SystemPrompt.placement() {
		case PlaceStart:
			b.WriteString(block)
		case PlaceFirstUser:
			for i, t := range turns {
				if t.speaker == User {
					host = i
					break
				}
			}
		case PlaceLastUser:
			for i := len(turns) - 1; i >= 0; i-- {
				if turns[i].speaker == User {
					host = i
					break
				}
			}
		}
		if f.SystemPrompt.placement() != PlaceStart && host < 0 {
			// No user turn to carry it: the system block becomes a user turn of its own.
			b.WriteString(f.User.opening())
			b.WriteString(strings.TrimRight(block, " \t\r\n"))
			b.WriteString(f.User.Suf)
		}
	}
	for i, t := range turns {
		r := f.role(t.speaker)
		b.WriteString(r.opening())
		if i == host {
			b.WriteString(block)
		}
		b.WriteString(t.text)
		b.WriteString(r.Suf)
	}
	b.WriteString(f.Prompt.Suf)
	b.WriteString(f.Cue())
	return b.String()
}

// fit drops the oldest utterances until the prompt fits budget tokens.
//
// Rules: the system block (with any summary) and the cue always stay; utterances are
// dropped from the oldest; after dropping, a kept agent utterance at the front is dropped
// too when a user utterance follows it, so that the prompt starts with an exchange (chat
// templates that expect user/agent alternation need this). When even no utterance fits,
// the error wraps ErrContextTooSmall. With a nil tokenizer nothing is dropped.
//
// Token counts fall as utterances are dropped (a subword tokenizer may merge across the
// cut, but never by more than a token or two), so the first start that fits is found by
// binary search: O(log n) tokenizations of the prompt instead of O(n). The chosen prompt
// is counted again, and if it still does not fit, more utterances are dropped one by
// one. The reported count is always that of the returned text.
func (s promptSource) fit(ctx context.Context, tok Tokenizer, budget int) (FittedPrompt, error) {
	return s.fitWith(ctx, tok, budget, budget, -1)
}

// fitWith is fit with hysteresis for the Store: when the prompt from utterance prefer
// (>= 0) on fits budget, that start is kept; otherwise utterances are dropped until the
// prompt fits target (<= budget), or budget when target cannot be met. Dropping past what
// is needed keeps the prompt's start, and so the LLM's KV cache of it, the same for
// several turns instead of sliding by one exchange every turn.
func (s promptSource) fitWith(ctx context.Context, tok Tokenizer, budget, target, prefer int) (FittedPrompt, error) {
	stop := s.format.StopPatterns()
	n := len(s.utterances)
	if tok == nil {
		return FittedPrompt{Text: s.render(0), Stop: stop, Utterances: n}, nil
	}
	counts := map[int]int{}
	count := func(start int) (int, error) {
		if c, ok := counts[start]; ok {
			return c, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		c, err := tok.CountTokens(s.render(start))
		if err != nil {
			return 0, fmt.Errorf("dialogue: counting prompt tokens: %w", err)
		}
		counts[start] = c
		return c, nil
	}
	result := func(start, c int) FittedPrompt {
		return FittedPrompt{Text: s.render(start), Stop: stop, Tokens: c, Utterances: n - start, Dropped: start, start: start}
	}
	c0, err := count(0)
	if err != nil {
		return FittedPrompt{}, err
	}
	if c0 <= budget {
		return result(0, c0), nil
	}
	if prefer > 0 && prefer <= n {
		c, err := count(prefer)
		if err != nil {
			return FittedPrompt{}, err
		}
		if c <= budget {
			return result(prefer, c), nil
		}
	}
	cn, err := count(n)
	if err != nil {
		return FittedPrompt{}, err
	}
	if cn > budget {
		return FittedPrompt{}, fmt.Errorf("dialogue: %w (%d tokens, budget %d)", ErrContextTooSmall, cn, budget)
	}
	if cn > target {
		target = budget
	}
	lo, hi := 1, n // count(lo-1) > target, count(hi) <= target
	for lo < hi {
		mid := lo + (hi-lo)/2
		c, err := count(mid)
		if err != nil {
			return FittedPrompt{}, err
		}
		if c <= target {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	start := lo
	if start < n && !startsExchange(s.utterances[start]) {
		for j := start + 1; j < n; j++ {
			if startsExchange(s.utterances[j]) {
				start = j
				break
			}
		}
	}
	c, err := count(start)
	if err != nil {
		return FittedPrompt{}, err
	}
	for c > target && start < n { // a tokenizer that is not monotone after all
		start++
		if c, err = count(start); err != nil {
			return FittedPrompt{}, err
		}
	}
	return result(start, c), nil
}

// historyJSON is History's saved form (inside a session).
type historyJSON struct {
	Format              Format      `json:"format"`
	InitialSystemPrompt string      `json:"initial_system_prompt"`
	SystemPrompt        string      `json:"system_prompt"`
	InterruptedMark     string      `json:"interrupted_mark,omitempty"`
	SummaryLabel        string      `json:"summary_label"`
	ShowBackchannels    bool        `json:"show_backchannels,omitempty"`
	Utterances          []Utterance `json:"utterances"`
}

// MarshalJSON writes the whole history.
func (h *History) MarshalJSON() ([]byte, error) {
	utts := h.utterances
	if utts == nil {
		utts = []Utterance{}
	}
	return json.Marshal(historyJSON{
		Format: h.format, InitialSystemPrompt: h.initialSystem, SystemPrompt: h.system,
		InterruptedMark: h.interruptedMark, SummaryLabel: h.summaryLabel, ShowBackchannels: h.backchannels,
		Utterances: utts,
	})
}

// UnmarshalJSON reads what MarshalJSON writes and checks it.
func (h *History) UnmarshalJSON(data []byte) error {
	var j historyJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("dialogue: history: %w", err)
	}
	if err := j.Format.Validate(); err != nil {
		return fmt.Errorf("dialogue: history: %w", err)
	}
	for i, u := range j.Utterances {
		if !u.Speaker.Valid() || u.TurnID < 0 {
			return fmt.Errorf("dialogue: history: %w at %d", ErrInvalidUtterance, i)
		}
		if i > 0 && u.TurnID < j.Utterances[i-1].TurnID {
			return fmt.Errorf("dialogue: history: %w: turn ids decrease at %d", ErrInvalidUtterance, i)
		}
	}
	*h = History{
		format: j.Format, initialSystem: j.InitialSystemPrompt, system: j.SystemPrompt,
		interruptedMark: j.InterruptedMark, summaryLabel: j.SummaryLabel, utterances: j.Utterances,
		backchannels: j.ShowBackchannels,
	}
	return nil
}
