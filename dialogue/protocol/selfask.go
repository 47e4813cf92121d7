package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The self-ask markers (Press et al., 2022, "Measuring and Narrowing the Compositionality
// Gap in Language Models"). Models trained on or prompted with them write them verbatim.
const (
	markQuestion     = "Question:"
	markNeeded       = "Are follow up questions needed here:"
	markFollowUp     = "Follow up:"
	markIntermediate = "Intermediate answer:"
	markFinal        = "So the final answer is:"
)

// DefaultMaxFollowUps is how many follow-up questions the model may ask before the final
// answer is forced.
const DefaultMaxFollowUps = 5

// DefaultSelfAskTemplate lays out a self-ask prompt: the few-shot examples, the
// conversation so far (when any), the question and the scratchpad of follow-ups.
const DefaultSelfAskTemplate = "{examples}{context}" + markQuestion + " {question}\n" + markNeeded + "{scratchpad}"

// FollowUp is one follow-up question with its intermediate answer.
type FollowUp struct {
	Question, Answer string
}

// SelfAskExample is one few-shot example: a question, the follow-ups that lead to the
// answer (none when the question can be answered directly), and the final answer.
type SelfAskExample struct {
	Question  string
	FollowUps []FollowUp
	Answer    string
}

// Scratchpad is the state of one self-ask run.
type Scratchpad struct {
	Question string
	// Context is the conversation so far, as text (for example a dialogue.Transcript);
	// "" for none.
	Context   string
	FollowUps []FollowUp
	// Pending is a follow-up question waiting for its intermediate answer: Encode then asks
	// the model for that answer.
	Pending string
	// ForceAnswer asks for the final answer now, whatever the number of follow-ups.
	ForceAnswer bool
}

// Step is what Decode found in the model's output.
type Step struct {
	// Final is set when the model gave its final answer, in Answer.
	Final  bool
	Answer string
	// FollowUp is the next follow-up question, when not Final.
	FollowUp string
	// IntermediateAnswer is the model's answer to FollowUp when it wrote one, or, for a
	// scratchpad with a Pending question, the answer to that question.
	IntermediateAnswer string
}

// ErrNoDecision is returned by Decode when the output holds neither a follow-up question
// nor a final answer.
var ErrNoDecision = errors.New("self-ask: the output has neither a follow-up question nor a final answer")

// SelfAsk is the self-ask protocol. The zero value is not usable; use NewSelfAsk.
type SelfAsk struct {
	// Template must use {question} and {scratchpad}; {examples} and {context} are
	// optional.
	Template Template
	Examples []SelfAskExample
	// MaxFollowUps: after this many follow-ups the final answer is forced. 0 means
	// DefaultMaxFollowUps; a negative value forces a direct answer.
	MaxFollowUps int
}

// NewSelfAsk returns the self-ask protocol with the default template and examples.
func NewSelfAsk() SelfAsk {
	return SelfAsk{Template: MustParseTemplate(DefaultSelfAskTemplate), Examples: DefaultSelfAskExamples()}
}

// DefaultSelfAskExamples returns the shipped few-shot examples.
func DefaultSelfAskExamples() []SelfAskExample {
	return []SelfAskExample{
		{
			Question: "How many legs do a spider and an ant have together?",
			FollowUps: []FollowUp{
				{"How many legs does a spider have?", "A spider has eight legs."},
				{"How many legs does an ant have?", "An ant has six legs."},
			},
			Answer: "Fourteen legs.",
		},
		{
			Question: "What colour do you get when you mix blue and yellow paint?",
			Answer:   "Green.",
		},
		{
			Question: "Was the inventor of the telephone born in the country where he died?",
			FollowUps: []FollowUp{
				{"Who is credited with inventing the telephone?", "Alexander Graham Bell."},
				{"Where was Alexander Graham Bell born?", "In Edinburgh, Scotland."},
				{"Where did Alexander Graham Bell die?", "In Nova Scotia, Canada."},
			},
			Answer: "No, he was born in Scotland and died in Canada.",
		},
		{
			Question: "Which is bigger, Saturn's largest moon or the planet Mercury?",
			FollowUps: []FollowUp{
				{"What is Saturn's largest moon?", "Titan."},
				{"How wide are Titan and Mercury?", "Titan is about 5,150 km across and Mercury about 4,880 km."},
			},
			Answer: "Titan, Saturn's largest moon, is slightly bigger than Mercury.",
		},
	}
}

func (p SelfAsk) maxFollowUps() int {
	switch {
	case p.MaxFollowUps == 0:
		return DefaultMaxFollowUps
	case p.MaxFollowUps < 0:
		return 0
	}
	return p.MaxFollowUps
}

// forced reports whether the prompt for pad demands the final answer.
func (p SelfAsk) forced(pad Scratchpad) bool {
	return pad.Pending == "" && (pad.ForceAnswer || len(pad.FollowUps) >= p.maxFollowUps())
}

// oneLine keeps model-facing texts on one line, since the protocol is line-based.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func writeSteps(b *strings.Builder, followUps []FollowUp) {
	if len(followUps) == 0 {
		return
	}
	b.WriteString(" Yes.\n")
	for _, f := range followUps {
		b.WriteString(markFollowUp + " " + oneLine(f.Question) + "\n")
		b.WriteString(markIntermediate + " " + oneLine(f.Answer) + "\n")
	}
}

// Encode lays out the prompt for the scratchpad's next step and returns the stop patterns
// for it. The prompt ends where the model continues: after "needed here:" (first step),
// after the last intermediate answer, after "Intermediate answer:" (Pending), or after
// "So the final answer is:" (forced).
func (p SelfAsk) Encode(pad Scratchpad) (string, []string, error) {
	if !p.Template.Has("question") || !p.Template.Has("scratchpad") {
		return "", nil, fmt.Errorf("%w: a self-ask template needs {question} and {scratchpad}", ErrInvalidTemplate)
	}
	if strings.TrimSpace(pad.Question) == "" {
		return "", nil, errors.New("self-ask: empty question")
	}
	var ex strings.Builder
	for _, e := range p.Examples {
		ex.WriteString(markQuestion + " " + oneLine(e.Question) + "\n" + markNeeded)
		if len(e.FollowUps) == 0 {
			ex.WriteString(" No.\n")
		}
		writeSteps(&ex, e.FollowUps)
		ex.WriteString(markFinal + " " + oneLine(e.Answer) + "\n\n")
	}
	context := strings.TrimSpace(pad.Context)
	if context != "" {
		context = "Conversation so far:\n" + context + "\n\n"
	}
	var sp strings.Builder
	writeSteps(&sp, pad.FollowUps)
	stop := []string{markIntermediate, "\n" + markQuestion}
	switch {
	case pad.Pending != "":
		if len(pad.FollowUps) == 0 {
			sp.WriteString(" Yes.\n")
		}
		sp.WriteString(markFollowUp + " " + oneLine(pad.Pending) + "\n" + markIntermediate)
		stop = []string{"\n"}
	case p.forced(pad):
		if len(pad.FollowUps) == 0 {
			sp.WriteString(" No.\n")
		}
		sp.WriteString(markFinal)
		stop = []string{"\n"}
	}
	prompt, err := p.Template.Render(map[string]string{
		"examples": ex.String(), "context": context, "question": oneLine(pad.Question), "scratchpad": sp.String(),
	})
	if err != nil {
		return "", nil, err
	}
	return prompt, stop, nil
}

// Decode reads the model's continuation of the prompt Encode made for pad: the final
// answer or the next follow-up question (whichever comes first), or, for a Pending
// question, its intermediate answer. A forced prompt's output is the final answer.
// Markers are matched without regard to ASCII case, and "Follow-up:" is accepted too.
func (p SelfAsk) Decode(pad Scratchpad, output string) (Step, error) {
	if i := indexFold(output, "\n"+markQuestion); i >= 0 {
		output = output[:i] // the model went on to invent another example
	}
	if pad.Pending != "" {
		a := firstLine(output)
		if a == "" {
			return Step{}, fmt.Errorf("%w: empty intermediate answer", ErrNoDecision)
		}
		return Step{FollowUp: pad.Pending, IntermediateAnswer: a}, nil
	}
	if p.forced(pad) {
		a := firstLine(output)
		if rest, ok := cutFold(a, "final answer is:"); ok {
			a = strings.TrimSpace(rest)
		}
		if a == "" {
			return Step{}, fmt.Errorf("%w: empty final answer", ErrNoDecision)
		}
		return Step{Final: true, Answer: a}, nil
	}
	final := indexFold(output, "final answer is:")
	follow, followLen := indexFold(output, markFollowUp), len(markFollowUp)
	if alt := indexFold(output, "Follow-up:"); alt >= 0 && (follow < 0 || alt < follow) {
		follow, followLen = alt, len("Follow-up:")
	}
	switch {
	case final >= 0 && (follow < 0 || final < follow):
		a := firstLine(output[final+len("final answer is:"):])
		if a == "" {
			return Step{}, fmt.Errorf("%w: empty final answer", ErrNoDecision)
		}
		return Step{Final: true, Answer: a}, nil
	case follow >= 0:
		rest := output[follow+followLen:]
		q := rest
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			q = rest[:nl]
		}
		q = strings.TrimSpace(q)
		if q == "" {
			return Step{}, fmt.Errorf("%w: empty follow-up question", ErrNoDecision)
		}
		step := Step{FollowUp: q}
		if ia := indexFold(rest, markIntermediate); ia >= 0 {
			between := rest[:ia]
			// Only an answer that directly follows this question belongs to it.
			if strings.Count(strings.TrimSpace(between), "\n") == 0 {
				step.IntermediateAnswer = firstLine(rest[ia+len(markIntermediate):])
			}
		}
		return step, nil
	}
	return Step{}, ErrNoDecision
}

// firstLine returns the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

// indexFold is strings.Index ignoring ASCII case (the markers are ASCII, so byte offsets
// into s stay valid).
func indexFold(s, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if asciiEqualFold(s[i:i+n], sub) {
			return i
		}
	}
	return -1
}

func cutFold(s, sub string) (string, bool) {
	if i := indexFold(s, sub); i >= 0 {
		return s[i+len(sub):], true
	}
	return s, false
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Answerer answers a follow-up question (a search engine, a tool); without one the model
// answers its own follow-ups.
type Answerer interface {
	Answer(ctx context.Context, question string) (string, error)
}

// RunOptions tune SelfAsk.Run.
type RunOptions struct {
	// MaxTokens bounds each model call (0: 96).
	MaxTokens int
	Answerer  Answerer
}

// Result is the outcome of a self-ask run: only Answer is meant to be spoken.
type Result struct {
	Answer    string
	FollowUps []FollowUp
	// Forced is set when the final answer had to be asked for (follow-up limit reached,
	// or the model's output could not be read).
	Forced bool
}

// Run thinks before answering: it lets the model ask and answer follow-up questions (at
// most MaxFollowUps) and returns the final answer.
func (p SelfAsk) Run(ctx context.Context, c Completer, pad Scratchpad, opts RunOptions) (Result, error) {
	maxTokens := opts.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 96
	}
	complete := func(pad Scratchpad) (Step, error) {
		prompt, stop, err := p.Encode(pad)
		if err != nil {
			return Step{}, err
		}
		out, err := c.Complete(ctx, prompt, maxTokens, stop)
		if err != nil {
			return Step{}, fmt.Errorf("self-ask: %w", err)
		}
		return p.Decode(pad, out)
	}
	// Every round adds a follow-up or ends; the bound also covers a forced answer.
	for round := 0; round <= p.maxFollowUps()+1; round++ {
		step, err := complete(pad)
		switch {
		case errors.Is(err, ErrNoDecision) && !p.forced(pad):
			pad.ForceAnswer = true
			continue
		case err != nil:
			return Result{FollowUps: pad.FollowUps, Forced: p.forced(pad)}, err
		case step.Final:
			return Result{Answer: step.Answer, FollowUps: pad.FollowUps, Forced: p.forced(pad)}, nil
		}
		answer := step.IntermediateAnswer
		switch {
		case opts.Answerer != nil:
			if answer, err = opts.Answerer.Answer(ctx, step.FollowUp); err != nil {
				return Result{FollowUps: pad.FollowUps}, fmt.Errorf("self-ask: answering %q: %w", step.FollowUp, err)
			}
		case answer == "":
			pending := pad
			pending.Pending = step.FollowUp
			ia, err := complete(pending)
			if err != nil {
				return Result{FollowUps: pad.FollowUps}, err
			}
			answer = ia.IntermediateAnswer
		}
		pad.FollowUps = append(append([]FollowUp(nil), pad.FollowUps...), FollowUp{step.FollowUp, answer})
	}
	return Result{FollowUps: pad.FollowUps, Forced: true}, errors.New("self-ask: no final answer")
}

// AnswerFilter is a stream transform for a self-ask generation in one pass: it hides the
// thinking and lets through only the final answer's line, so that only the answer is
// spoken.
type AnswerFilter struct {
	held      string
	answering bool
	done      bool
	started   bool // the answer's first non-space character was let through
}

// NewAnswerFilter returns a filter for one stream.
func NewAnswerFilter() *AnswerFilter { return &AnswerFilter{} }

const answerMarker = "final answer is:"

// Push implements the LLM module's stream-transform hook.
func (a *AnswerFilter) Push(piece string) string {
	switch {
	case a.done:
		return ""
	case a.answering:
		return a.answer(piece)
	}
	a.held += piece
	i := indexFold(a.held, answerMarker)
	if i < 0 {
		// Keep only what could still be the start of the marker.
		if keep := len(answerMarker) - 1; len(a.held) > keep {
			a.held = a.held[len(a.held)-keep:]
		}
		return ""
	}
	rest := a.held[i+len(answerMarker):]
	a.held, a.answering = "", true
	return a.answer(rest)
}

func (a *AnswerFilter) answer(s string) string {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		if a.started || strings.TrimSpace(s[:nl]) != "" {
			a.done = true
			s = s[:nl]
		} else {
			s = s[nl+1:] // the answer starts on the next line
			return a.answer(s)
		}
	}
	if !a.started {
		s = strings.TrimLeft(s, " \t")
		a.started = s != ""
	}
	return s
}

// Flush implements the stream-transform hook; the filter holds nothing worth speaking.
func (a *AnswerFilter) Flush() string { return "" }
