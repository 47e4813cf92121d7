// Package llm is Parley's "thinking" step: the Engine interface for LLMs that stream a
// completion for a prompt, the OpenAI-compatible HTTP engine (pure Go), the clause
// splitter that turns the token stream into speakable clauses, and the network module
// that generates the agent's turn when the dialogue manager asks for it. The in-process
// llama.cpp engine is package llamacpp.
package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sampling selects how the next token is chosen. The zero value is greedy decoding.
type Sampling struct {
	// Temperature 0 means greedy (deterministic); higher is more random.
	Temperature float32
	// TopK, TopP and MinP restrict the candidates (0: off).
	TopK int
	TopP float32
	MinP float32
	// RepeatPenalty above 1 discourages recently generated tokens (0 or 1: off).
	RepeatPenalty float32
	// RepeatLastN is how many recent tokens the penalty looks at (0: 64).
	RepeatLastN int
	// Seed makes sampled (non-greedy) generations repeatable.
	Seed uint32
}

// Greedy reports whether s picks the most likely token every time.
func (s Sampling) Greedy() bool { return s.Temperature <= 0 }

// Role names the author of a chat message.
type Role string

// Chat roles of the OpenAI chat API.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// ChatMessage is one message for engines that take a conversation rather than a prompt
// (the HTTP engine in chat mode).
type ChatMessage struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
}

// Request asks an engine for one completion.
type Request struct {
	// Prompt is the complete prompt text, in the model's prompt format.
	Prompt string
	// Messages, when set, replace Prompt for engines in chat mode; other engines ignore them.
	Messages []ChatMessage
	// MaxTokens limits the generated tokens (0: until end of generation or a full context).
	MaxTokens int
	// Stop ends generation at the first of these strings; the stop string and everything
	// after it is never emitted. Empty strings and invalid UTF-8 are ignored.
	Stop []string
	// Sampling chooses tokens; the zero value is greedy.
	Sampling Sampling
}

// Why generation stopped.
const (
	StopEOG       = "eog"       // the model ended its turn (end-of-generation token)
	StopString    = "stop"      // a stop string appeared
	StopLength    = "length"    // MaxTokens or the context length was reached
	StopCancelled = "cancelled" // ctx was cancelled or emit returned an error
	StopError     = "error"     // the engine failed (the error says why)
	StopPaused    = "paused"    // emit returned ErrPause to a Pauser: Continue goes on
)

// Result describes a finished generation.
type Result struct {
	// Text is everything emitted, after cutting at a stop string.
	Text string
	// Tokens is the number of generated tokens (for HTTP engines, as the server reports).
	Tokens int
	// PromptTokens is the prompt's length in tokens; CachedTokens how many of them were
	// reused from the previous generation instead of being evaluated again.
	PromptTokens int
	CachedTokens int
	// StopReason is one of StopEOG, StopString, StopLength, StopCancelled, StopError.
	StopReason string
	// TimeToFirstToken runs from the start of Generate to the first generated token.
	TimeToFirstToken time.Duration
	// PromptEval is the time spent evaluating the prompt (in-process engine only).
	PromptEval time.Duration
	// Duration is the whole generation.
	Duration time.Duration
	// TokensPerSecond is the decode speed after the first token.
	TokensPerSecond float64
}

// Engine generates text. Implementations serialise concurrent calls to Generate.
type Engine interface {
	// Generate streams a completion of req. emit receives each decoded text piece as soon
	// as it is safe: pieces are valid UTF-8, and text that might be the start of a stop
	// string is held back until it is known not to be. Generation stops between tokens
	// when ctx is cancelled or emit returns an error; no piece is emitted after that, and
	// Generate returns the partial Result with StopReason StopCancelled and an error that
	// wraps ctx's error or emit's.
	Generate(ctx context.Context, req Request, emit func(piece string) error) (Result, error)
	// Close frees the engine.
	Close() error
}

// ErrPause, returned by emit, pauses the generation after the piece emit was given. A
// Pauser keeps the generation for Continue (Generate returns StopPaused and no error);
// other engines stop as for any error of emit.
var ErrPause = errors.New("llm: generation paused")

// ErrNothingPaused is what Continue returns when no generation waits for it: none was
// paused, or the engine did something else since.
var ErrNothingPaused = errors.New("llm: no paused generation to continue")

// Pauser is an Engine whose generations can pause and go on exactly where they stopped,
// as if they had not paused: the LLM module prepares a reply's first clause while the
// user may still be speaking and generates the rest only once the reply is confirmed,
// so that a preparation does not take the machine from the recogniser meanwhile.
type Pauser interface {
	// Continue resumes the generation the last Generate or Continue paused. Its Result
	// counts the whole generation (Text, Tokens); emit gets the pieces from where the
	// generation paused. Any other call to the engine in between drops the paused
	// generation (ErrNothingPaused).
	Continue(ctx context.Context, emit func(piece string) error) (Result, error)
}

// Tokenizer counts tokens the way an engine's model does; the dialogue history uses it to
// keep prompts within the context.
type Tokenizer interface {
	CountTokens(text string) (int, error)
}

// ErrPromptTooLong means the prompt does not fit the model's context.
var ErrPromptTooLong = errors.New("llm: prompt too long for the context")

// ErrClosed is returned by engines used after Close.
var ErrClosed = errors.New("llm: engine closed")

// CancelledError is the error an engine's Generate returns when ctx or emit stopped the
// generation (emitErr: emit's error, nil when ctx was cancelled).
func CancelledError(ctx context.Context, emitErr error) error {
	if emitErr != nil {
		return fmt.Errorf("llm: generation stopped by its consumer: %w", emitErr)
	}
	return fmt.Errorf("llm: generation cancelled: %w", context.Cause(ctx))
}

// TokensPerSecond is the decode speed engines report: tokens over d (0 when either is
// not positive).
func TokensPerSecond(tokens int, d time.Duration) float64 {
	if tokens <= 0 || d <= 0 {
		return 0
	}
	return float64(tokens) / d.Seconds()
}

var _ Engine = (*HTTPEngine)(nil)
