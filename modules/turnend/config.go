package turnend

import (
	"errors"
	"fmt"
	"time"
)

// Config configures the end-of-turn policy. The reasoning behind the defaults is in
// docs/TURN-TAKING.md.
type Config struct {
	// Policy is "silence" (a fixed silence, the VAD's end_of_turn), "words" (the last
	// words decide between the holds) or "predictive" (the words and the LLM's estimate
	// that the turn is complete).
	Policy string `yaml:"policy"`
	// Holds are the silences the words and predictive policies choose between.
	Holds Holds `yaml:",inline"`
	// CompleteAbove: an LLM probability at or above it makes a turn complete (short hold).
	CompleteAbove float64 `yaml:"complete_above"`
	// IncompleteBelow: an LLM probability below it makes a turn incomplete (long hold).
	IncompleteBelow float64 `yaml:"incomplete_below"`
	// Language selects the built-in list of words after which speakers go on.
	Language string `yaml:"language"`
	// WaitWords adds words (or phrases) to that list; "-word" removes one.
	WaitWords []string `yaml:"wait_words"`
	// FreshSlack: the recogniser's last word must end at most this long before the
	// speech did for the words to count as covering it.
	FreshSlack time.Duration `yaml:"fresh_slack"`
	// AfterInterruption is the least silence that ends a turn whose speech stopped the
	// agent while it is up to three words long, or after its speaker went on after a pause
	// only this wait bridged (0: no such floor; see Waits). Whoever interrupts has the
	// floor, and often goes on after a pause ("wait… what about tomorrow", "turn… off…
	// the light"); the short hold would answer each phrase, and the user would have to
	// interrupt again. A voice that stopped the agent in its first moments
	// (turn_taking.barge_in.continue_window) takes no floor: it goes on with a turn the
	// agent took for ended, which the policy ends as any other, but not before the
	// default hold while it is one word long ("no, … not that one": Waits.OneWordKept).
	AfterInterruption time.Duration `yaml:"after_interruption"`
	// Pitch lets the predictive policy hear how the speech before a silence ended: words
	// that could end a sentence ("pack a hat") said with a level pitch, as an item of a
	// list or a hesitation is, get the default hold, not the short one. A voice whose
	// pitch hardly moves (a monotone synthesiser) gives no cue, and the words decide. Off
	// by default: on the evaluation's voices it spared the agent a few pauses but made
	// finished questions wait longer (docs/TURN-TAKING.md, "Pitch").
	Pitch bool `yaml:"pitch"`
}

// DefaultConfig returns the predictive policy with holds of 160 ms, 500 ms and 1.2 s,
// and at least 800 ms after the user interrupted the agent.
func DefaultConfig() Config {
	return Config{
		Policy:            "predictive",
		Holds:             Holds{Short: 160 * time.Millisecond, Default: 500 * time.Millisecond, Long: 1200 * time.Millisecond},
		CompleteAbove:     0.3,
		IncompleteBelow:   0.01,
		Language:          "en",
		FreshSlack:        300 * time.Millisecond,
		AfterInterruption: 800 * time.Millisecond,
	}
}

// Waits returns the Decider's timings this config sets.
func (c Config) Waits() Waits {
	return Waits{FreshSlack: c.FreshSlack, AfterInterruption: c.AfterInterruption, OneWordKept: c.Holds.Default}
}

// UsesHolds reports whether the policy chooses between Holds (the silence policy waits
// the VAD's end_of_turn instead).
func (c Config) UsesHolds() bool { return c.Policy != "silence" }

// UsesEstimate reports whether the policy reads the LLM's estimate that the user's turn
// is complete (the predictive policy; words decide alone otherwise).
func (c Config) UsesEstimate() bool { return c.Policy == "predictive" }

// LongestHold is the longest silence the policy may wait for before it ends a turn.
func (c Config) LongestHold() time.Duration {
	return max(c.Holds.Long, c.AfterInterruption)
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	switch c.Policy {
	case "silence", "words", "predictive":
	default:
		errs = append(errs, fmt.Errorf("turnend: policy %q (want silence, words or predictive)", c.Policy))
	}
	h := c.Holds
	if h.Short <= 0 || h.Default < h.Short || h.Long < h.Default {
		errs = append(errs, fmt.Errorf("turnend: holds must satisfy 0 < short ≤ default ≤ long (got %v, %v, %v)", h.Short, h.Default, h.Long))
	}
	// Written so that NaN, which fails every comparison, is out of range too.
	if !(c.IncompleteBelow >= 0 && c.IncompleteBelow <= c.CompleteAbove && c.CompleteAbove <= 1) {
		errs = append(errs, fmt.Errorf("turnend: need 0 ≤ incomplete_below ≤ complete_above ≤ 1 (got %g, %g)", c.IncompleteBelow, c.CompleteAbove))
	}
	if c.FreshSlack < 0 {
		errs = append(errs, errors.New("turnend: fresh_slack must not be negative"))
	}
	if c.AfterInterruption < 0 {
		errs = append(errs, errors.New("turnend: after_interruption must not be negative"))
	}
	return errors.Join(errs...)
}

// NewPolicy builds the policy c names; silence is the hold of the "silence" policy.
func (c Config) NewPolicy(silence time.Duration) (Policy, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.UsesHolds() {
		return Silence{After: silence}, nil
	}
	lex, err := NewLexicon(c.Language, c.WaitWords)
	if err != nil {
		return nil, err
	}
	if !c.UsesEstimate() {
		return Words{Holds: c.Holds, Lexicon: lex}, nil
	}
	return Predictive{Holds: c.Holds, CompleteAbove: c.CompleteAbove, IncompleteBelow: c.IncompleteBelow, Lexicon: lex, Pitch: c.Pitch}, nil
}
